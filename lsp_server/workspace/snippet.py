"""A piece of another file that a prompt quotes (from the index, an open document, or a
definition), named as the prompt names its file."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Snippet:
    path: str
    text: str
