"""The fastcomplete language server (pygls) and its command-line entry point."""

__version__ = "0.1.0"
