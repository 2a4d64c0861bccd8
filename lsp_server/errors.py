"""What the server answers with an error instead of dying: requests that cannot be served."""


class BadRequest(Exception):
    """The client asked for something impossible: it gets this message as an error response."""
