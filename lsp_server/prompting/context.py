"""The prompt for a completion: what the model sees of the file, within a token budget.

Order, most stable first so consecutive keystrokes keep the same prompt start (and KV cache):
snippets from other open files, the file's path, imports the window does not show, signatures of
the enclosing definitions the window does not show, then the window: the prefix from a line that
moves back only in 64-line steps. Bodies of unrelated definitions above the window are what is
left out. A model with a FIM template also gets the text after the cursor.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tree_sitter import Node, Tree

from inference.manifest import FimTemplate
from lsp_server.config.tuning import (
    FIM_SUFFIX_MAX_LINES,
    FIM_SUFFIX_TOKENS,
    LINE_REST_TOKENS,
    MAX_CHARS_PER_TOKEN,
    WINDOW_STEP_LINES,
)
from lsp_server.text.languages import (
    DEFINITION_NODES,
    IMPORT_NODES,
    STRINGLIKE,
    comment_marker,
)
from lsp_server.text.syntax import parse
from lsp_server.workspace.snippet import Snippet


@dataclass(frozen=True)
class Context:
    prompt: str
    window_start_line: int
    in_string_or_comment: bool


def window_start(
    lines: list[str],
    cursor_line: int,
    budget: int,
    cost: Callable[[str], int],
    step_lines: int = WINDOW_STEP_LINES,
) -> int:
    """First line of the window: coarse steps back from the cursor while the budget allows."""
    start = cursor_line - cursor_line % step_lines
    used = cost("\n".join(lines[start : cursor_line + 1]))
    if used > budget:
        # Even one step is too much: the nearest whole lines that fit (the cursor's line stays).
        while start < cursor_line and used > budget:
            used -= cost(lines[start] + "\n")
            start += 1
        return start
    while start > 0:
        step_start = max(0, start - step_lines)
        step = cost("\n".join(lines[step_start:start]))
        if used + step > budget:
            break
        used += step
        start = step_start
    return start


def _outside_window(tree: Tree, source: bytes, window_byte: int) -> tuple[list[str], list[str]]:
    """Imports above the window, and the first lines of the definitions still open where the
    window starts (the enclosing class/function of the code in the window).

    Only nodes above the window are read (and AboveWindow keeps the answer while the text
    above the window stays the same).
    """
    root = tree.root_node
    imports = [
        source[n.start_byte : n.end_byte].decode("utf-8", "replace")
        for n in root.children
        if n.type in IMPORT_NODES and n.end_byte <= window_byte
    ]
    headers = []
    node, end = root, max(len(source[:window_byte].rstrip()) - 1, 0)
    while True:
        child = next((c for c in node.children if c.start_byte <= end < c.end_byte), None)
        if child is None:
            break
        if child.type in DEFINITION_NODES:
            line_end = source.find(b"\n", child.start_byte)
            header = source[child.start_byte : line_end if line_end >= 0 else child.end_byte]
            headers.append(header.decode("utf-8", "replace").rstrip())
        node = child
    return imports, headers


class AboveWindow:
    """What lies above the window (imports, open definitions), remembered by that text.

    While the user types below the window the text above it stays the same, so the prompt's
    start, and the KV cache behind it, stays put even when their half-typed code makes
    tree-sitter read the document differently. Shared by worker threads.
    """

    def __init__(self, size: int = 32) -> None:
        self._items: OrderedDict[tuple[str, int, int], tuple[list[str], list[str]]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(
        self, language_id: str, above: str, compute: Callable[[], tuple[list[str], list[str]]]
    ) -> tuple[list[str], list[str]]:
        key = (language_id, len(above), hash(above))
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        found = compute()
        with self._lock:
            self._items[key] = found
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return found


def cursor_place(root: Node, cursor: int, line_prefix: str) -> str | None:
    """Whether the cursor (a byte offset) is in a "comment" or a "string", or None."""
    node = root.descendant_for_byte_range(max(cursor - 1, 0), max(cursor - 1, 0))
    while node is not None:
        if any(kind in node.type for kind in STRINGLIKE):
            return "comment" if "comment" in node.type else "string"
        node = node.parent
    # A string still being typed has no end yet; tree-sitter recovers it as an ERROR node, so
    # fall back to quote parity on the line.
    line = line_prefix.replace("\\\\", "").replace('\\"', "").replace("\\'", "")
    return "string" if line.count('"') % 2 == 1 or line.count("'") % 2 == 1 else None


def build_context(
    text: str,
    offset: int,
    *,
    language_id: str,
    path: str,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
    snippets: Sequence[Snippet] = (),
    fim: FimTemplate | None = None,
    header: str = "comment",
    tree: Tree | None = None,
    above: AboveWindow | None = None,
    step_lines: int = WINDOW_STEP_LINES,
    repo: str = "",
    suffix_tokens: int | None = None,
) -> Context:
    """`header`: how the file's path is given: "comment" (`# pkg/mod.py`), "filename" (the
    `<filename>` token StarCoder-style training data uses) or "none"; a FIM template with
    Qwen2.5-Coder's repository tokens gets its repository-level format instead (`repo`: the
    workspace's name). `tree`: `text` already parsed (the document's incrementally kept tree);
    parsed here when not given. `above`: remembers what lies above the window across
    keystrokes (see AboveWindow). `step_lines`: how far the window's start moves at a time
    (small for a short prompt). `suffix_tokens`: the most tokens of code after the cursor in a
    FIM prompt (at most FIM_SUFFIX_TOKENS; each key before it computes it again)."""
    lines = text[:offset].split("\n")
    cursor_line = len(lines) - 1  # from the text itself: lone CRs would shift an LSP line number
    fixed = _files_part(fim, repo, snippets, path, comment_marker(language_id), header)
    if tree is None:
        tree = parse(language_id, text)
    cursor_byte = len(text[:offset].encode("utf-8"))
    budget = budget_tokens - count_tokens(fixed)
    suffix = ""
    if fim is not None:
        suffix = _suffix_part(text[offset:], suffix_tokens, budget, count_tokens)
        budget -= count_tokens(suffix)
    start = window_start(lines, cursor_line, budget, count_tokens, step_lines)
    window_offset = sum(len(r) + 1 for r in lines[:start])
    outside = ""
    if tree is not None and start > 0:
        outside = _outside_part(tree, text, window_offset, language_id, above, budget, count_tokens)
    window = _cut_long_line(text[window_offset:offset], budget)
    in_string = (
        tree is not None and cursor_place(tree.root_node, cursor_byte, lines[-1]) is not None
    )
    return Context(_arranged(fim, fixed, outside, window, suffix), start, in_string)


def _files_part(
    fim: FimTemplate | None,
    repo: str,
    snippets: Sequence[Snippet],
    path: str,
    marker: str | None,
    header: str,
) -> str:
    """What comes first, before the file's own code: the other files' snippets and the file's
    path, in the repository-level format where the FIM template has one."""
    if fim is not None and fim.file_sep is not None:
        return _repo_files(fim, repo, snippets, path)
    return _commented_files(marker, snippets, path, header)


def _suffix_part(
    after: str, suffix_tokens: int | None, budget: int, count_tokens: Callable[[str], int]
) -> str:
    """The code after the cursor a FIM prompt holds: at most `suffix_tokens` (capped at
    FIM_SUFFIX_TOKENS) and a quarter of what the budget has left."""
    most = FIM_SUFFIX_TOKENS if suffix_tokens is None else min(suffix_tokens, FIM_SUFFIX_TOKENS)
    return fim_suffix(after, min(most, max(0, budget // 4)), count_tokens)


def _outside_part(
    tree: Tree,
    text: str,
    window_offset: int,
    language_id: str,
    above: AboveWindow | None,
    budget: int,
    count_tokens: Callable[[str], int],
) -> str:
    """The imports and open definitions above the window, one a line; "" when they would take
    a quarter of the budget or more."""
    above_text = text[:window_offset]

    def compute() -> tuple[list[str], list[str]]:
        # Only on a miss: encoding the whole document is not a per-keystroke cost.
        window_byte = len(above_text.encode("utf-8"))
        return _outside_window(tree, text.encode("utf-8"), window_byte)

    imports, headers = above.get(language_id, above_text, compute) if above else compute()
    outside = "".join(f"{s}\n" for s in [*imports, *headers])
    if not outside or count_tokens(outside) >= budget // 4:
        return ""
    return outside


def _cut_long_line(window: str, budget: int) -> str:
    """The window, cut inside one enormous line (minified code, data): the budget counts whole
    lines, so such a line could hold far more than the budget."""
    if len(window) > budget * MAX_CHARS_PER_TOKEN:
        return window[-budget * MAX_CHARS_PER_TOKEN :]
    return window


def _arranged(fim: FimTemplate | None, fixed: str, outside: str, window: str, suffix: str) -> str:
    """The prompt's parts in the model's order. A repository-level template keeps the files
    outside its FIM part; another FIM template takes them as the start of the code before the
    cursor."""
    if fim is None:
        return fixed + outside + window
    after = plain_text(suffix, fim)
    if fim.file_sep is not None:
        return fixed + fim_order(fim, plain_text(outside + window, fim), after)
    return fim_order(fim, plain_text(fixed + outside + window, fim), after)


def _commented_files(
    marker: str | None, snippets: Sequence[Snippet], path: str, header: str
) -> str:
    """Other files' snippets as comments, then the file's path (a model without FIM tokens)."""
    parts: list[str] = []
    for snip in snippets:
        body = (
            snip.text
            if marker is None
            else "\n".join(f"{marker} {r}" for r in snip.text.split("\n"))
        )
        parts.append(f"{marker or ''} {snip.path}\n{body}\n".lstrip() if marker else f"{body}\n")
    if header == "comment" and marker is not None and path:
        parts.append(f"{marker} {path}\n")
    elif header == "filename" and path:
        parts.append(f"<filename>{path}\n")
    return "".join(parts)


def _repo_files(fim: FimTemplate, repo: str, snippets: Sequence[Snippet], path: str) -> str:
    """Qwen2.5-Coder's repository-level format: the repository's name, each snippet as a file of
    its own, then the current file's path; its FIM part follows."""
    sep = fim.file_sep or ""
    parts = [f"{fim.repo_name}{plain_text(repo or 'workspace', fim)}\n"] if fim.repo_name else []
    for snip in snippets:
        parts.append(f"{sep}{plain_text(snip.path, fim)}\n{plain_text(snip.text, fim)}\n")
    parts.append(f"{sep}{plain_text(path or 'untitled', fim)}\n")
    return "".join(parts)


def fim_order(fim: FimTemplate, before: str, after: str) -> str:
    """The code before and after the cursor in the template's order: prefix-suffix-middle (what
    Qwen2.5-Coder was trained on), or suffix first (SPM), which keeps the suffix's KV cached
    while the person types before it (measured in docs/cpu-code-model.md)."""
    if fim.order == "spm":
        return f"{fim.suffix}{after}{fim.prefix}{before}{fim.middle}"
    return f"{fim.prefix}{before}{fim.suffix}{after}{fim.middle}"


def fim_suffix(after: str, budget_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The code after the cursor for a FIM prompt: the rest of the cursor's line (cut only when
    it is far longer than the budget; alone when the budget is 0), then whole lines while they
    fit `budget_tokens`."""
    rows = after.split("\n", FIM_SUFFIX_MAX_LINES + 1)[: FIM_SUFFIX_MAX_LINES + 1]
    # A minified line is cut; the rest of an ordinary line (a closing bracket) always goes in.
    first = rows[0][: max(budget_tokens, LINE_REST_TOKENS) * MAX_CHARS_PER_TOKEN]
    if budget_tokens <= 0:
        return first
    kept, used = [first], count_tokens(first)
    for row in rows[1:]:
        cost = count_tokens(row + "\n")
        if used + cost > budget_tokens:
            break
        kept.append(row)
        used += cost
    return "\n".join(kept)


def plain_text(text: str, fim: FimTemplate) -> str:
    """`text` with any spelling of the template's special tokens broken up, so that code which
    mentions `<|fim_suffix|>` (a tokenizer's own source) is read as text, not as structure."""
    for token in fim.tokens():
        if token in text:
            text = text.replace(token, token[0] + "\u200b" + token[1:])
    return text
