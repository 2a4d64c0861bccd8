"""Errors that mean "this model cannot serve now": the router falls back on these, and only these.

Anything else raised while serving a request is the code's own bug: it surfaces with its
traceback and never trips a circuit breaker or hides behind another model's answer.
"""

from __future__ import annotations


class ModelFailure(Exception):
    """The model failed: ONNX Runtime raised, a model file is corrupt, a remote endpoint broke."""


class ModelLoadError(ModelFailure):
    """A model could not be loaded; the message names the file and the command that fixes it."""


class NoModel(Exception):
    """A model that does not exist, or is still loading: skip it quietly, trip no breaker."""
