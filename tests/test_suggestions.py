"""Type-through: the rest of a shown suggestion when the document has the start of it typed."""

from __future__ import annotations

from lsp_server.config.tuning import REMEMBERED_PER_DOCUMENT_ITEMS
from lsp_server.inline.answers import Origin
from lsp_server.inline.memory import Remembered, SuggestionMemory, typed_through

BEFORE = "def area(r):\n    return "
AFTER = "\n\n\ndef main():\n    print(area(2))\n"
SHOWN = Remembered(BEFORE, AFTER, "math.pi * r ** 2", Origin.MODEL, None)


def doc(typed: str, after: str = AFTER) -> tuple[str, int]:
    """The document with `typed` at the anchor, and the cursor after it."""
    return BEFORE + typed + after, len(BEFORE) + len(typed)


def test_typing_the_suggestion_leaves_its_rest() -> None:
    for typed in ("", "m", "math.", "math.pi * r ** "):
        found = typed_through(SHOWN, *doc(typed))
        assert found is not None and typed + found.rest == SHOWN.text


def test_diverging_or_finishing_it_ends_the_match() -> None:
    assert typed_through(SHOWN, *doc("math.e")) is None  # typed something else
    assert typed_through(SHOWN, *doc("math.pi * r ** 2")) is None  # all of it: nothing left
    text, cursor = doc("math")
    assert typed_through(SHOWN, text, cursor - 1) is None  # cursor moved back into it


def test_an_edit_elsewhere_ends_the_match() -> None:
    assert typed_through(SHOWN, *doc("ma", AFTER.replace("2", "3"))) is None  # below
    text, cursor = doc("ma")
    assert typed_through(SHOWN, "#" + text, cursor + 1) is None  # above


def test_non_ascii_text_around_the_suggestion() -> None:
    item = Remembered("s = 'héllo 🙂'\nt = ", "\nprint(s)\n", "s.upper()", Origin.MODEL, None)
    text = item.before + "s.u" + item.after
    found = typed_through(item, text, len(item.before) + 3)
    assert found is not None and found.rest == "pper()"


def test_memory_prefers_the_newest_and_forgets_closed_documents() -> None:
    memory = SuggestionMemory()
    memory.remember("a", SHOWN)
    # The suggestion after the shown one, remembered as if it had been accepted.
    ahead = Remembered(BEFORE + SHOWN.text, AFTER, "  # m²", Origin.PREFETCHED, None)
    memory.remember("a", ahead)
    found = memory.find("a", *doc(SHOWN.text))
    assert (
        found is not None
        and found.item.origin is Origin.PREFETCHED
        and found.origin is Origin.PREFETCHED
        and found.rest == "  # m²"
    )
    found = memory.find("a", *doc("math"))
    assert found is not None and found.item is SHOWN
    assert memory.find("b", *doc("math")) is None
    memory.forget("a")
    assert memory.find("a", *doc("math")) is None
    memory.remember("b", SHOWN)
    memory.clear()  # fast mode switched: the other model answers from now on
    assert memory.find("b", *doc("math")) is None


def test_the_suggestions_shown_while_a_line_is_typed_do_not_push_out_the_line_after_it() -> None:
    """The line after the shown one is computed for the line's end; the person then types the
    line through, and each key's answer taken from a run in flight is remembered too."""
    memory = SuggestionMemory()
    memory.remember("a", SHOWN)
    ahead = Remembered(BEFORE + SHOWN.text, AFTER, "  # m²", Origin.PREFETCHED, None)
    memory.remember("a", ahead)
    assert memory.prefetched("a", *doc(SHOWN.text))
    assert not memory.prefetched("a", *doc("math"))  # the shown one's place, not the one after
    for typed in range(1, REMEMBERED_PER_DOCUMENT_ITEMS + 2):
        rest = SHOWN.text[typed:]
        memory.remember(
            "a", Remembered(BEFORE + SHOWN.text[:typed], AFTER, rest, Origin.IN_FLIGHT, None)
        )
    found = memory.find("a", *doc(SHOWN.text))
    assert found is not None and found.item is ahead
    later = Remembered(BEFORE + SHOWN.text + "  # m²", AFTER, "\n", Origin.PREFETCHED, None)
    memory.remember("a", later)  # one computed ahead at a time: the newest
    assert not memory.prefetched("a", *doc(SHOWN.text))
