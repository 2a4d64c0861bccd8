"""The names that exist where the cursor ends an identifier: the document's own, those of the
snippets in the prompt, the repository's definitions (the index) and the language's keywords and
built-ins. What each still needs after the typed identifier goes to the decode loop
(GenerationConfig.name_rests, inference/names.py), which keeps the model's first tokens on them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from lsp_server.config.tuning import NAMES_MAX_CANDIDATES, NAMES_MIN_WORD_CHARS
from lsp_server.text.languages import language_names
from lsp_server.workspace.snippet import Snippet

if TYPE_CHECKING:
    from lsp_server.workspace.index import WorkspaceIndex

NAME = re.compile(r"(?!\d)\w+")
WORD_BEFORE = re.compile(r"(?!\d)\w+$")
NAME_OPENERS = frozenset(" \t.([{,=:<>+-*/%&|!~@^")
RepoNames = Callable[[str], Iterable[str]]  # prefix -> names the repository defines


def word_before(line_prefix: str, line_suffix: str) -> str:
    """The identifier the cursor ends ("" when it is not at the end of one)."""
    if line_suffix[:1].isalnum() or line_suffix[:1] == "_":
        return ""  # inside an identifier: what it becomes is already written
    found = WORD_BEFORE.search(line_prefix)
    return found.group() if found else ""


def name_rests(
    word: str,
    text: str,
    language_id: str,
    snippets: Iterable[Snippet] = (),
    repo_names: RepoNames | None = None,
    *,
    typed_at: int = -1,
) -> tuple[str, ...]:
    """What each known name starting with `word` still needs ("" for `word` itself), or () when
    none does or too many do. `typed_at`: where in `text` the identifier being typed starts (it
    is not a known name for being typed)."""
    if len(word) < NAMES_MIN_WORD_CHARS:
        return ()
    starts = re.compile(rf"(?<!\w){re.escape(word)}\w*")
    found = {m.group() for m in starts.finditer(text) if m.start() != typed_at}
    for snippet in snippets:
        found.update(starts.findall(snippet.text))
    found.update(n for n in language_names(language_id) if n.startswith(word))
    if repo_names is not None:
        found.update(repo_names(word))
    if not found or len(found) > NAMES_MAX_CANDIDATES:
        return ()
    return tuple(sorted(name[len(word) :] for name in found))


def starts_a_name(line_prefix: str) -> bool:
    """Whether an identifier may begin at the cursor: after an operator, a bracket, a dot, a
    space or indentation (not inside a word, a number or a quote)."""
    return not line_prefix or line_prefix[-1] in NAME_OPENERS


def recent_rests(recent_names: Iterable[str], language_id: str) -> tuple[str, ...]:
    """The names the person's recent edits brought in, offered before any of one is typed (the
    language's own words are not news)."""
    known = language_names(language_id)
    return tuple(n for n in recent_names if n not in known)[:NAMES_MAX_CANDIDATES]


def index_names(index: WorkspaceIndex, skip_rel: str | None) -> RepoNames:
    """The index's defined names by prefix, leaving out the file being edited (its text is the
    editor's, not the saved copy's); one more than the cap, so that too many shows."""
    skip = (skip_rel,) if skip_rel else ()
    return lambda prefix: index.defined_names(prefix, skip=skip, limit=NAMES_MAX_CANDIDATES + 1)
