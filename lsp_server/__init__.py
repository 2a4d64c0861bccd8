"""The fastcomplete language server (pygls) and its command-line entry point."""
