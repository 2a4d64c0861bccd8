"""Retention: an accepted text followed through later edits, and how much of it is kept."""

from __future__ import annotations

from lsp_server.telemetry.retention import RetentionTracker, edited_span, retained_chars


def test_edits_before_inside_and_after_the_span() -> None:
    span = (10, 20)
    assert edited_span(span, 0, 0, 3) == (13, 23)  # typed above
    assert edited_span(span, 2, 5, 0) == (7, 17)  # deleted above
    assert edited_span(span, 10, 10, 2) == (12, 22)  # typed right before it
    assert edited_span(span, 20, 20, 4) == (10, 20)  # typed right after it: not part of it
    assert edited_span(span, 12, 15, 1) == (10, 18)  # rewritten inside
    assert edited_span(span, 5, 15, 0) == (5, 10)  # deleted across its start
    assert edited_span(span, 15, 30, 2) == (10, 17)  # replaced across its end
    assert edited_span((10, 10), 10, 10, 6) == (16, 16)  # typed where an emptied span was


def test_retained_chars_counts_what_is_still_there_in_order() -> None:
    assert retained_chars("return a + b", "return a + b") == 12
    assert retained_chars("return a + b", "return a - b") == 11
    assert retained_chars("return a + b", "") == 0
    assert retained_chars("é + ü", "é + ü") == 5


def test_the_tracker_follows_edits_whichever_comes_first() -> None:
    tracker = RetentionTracker()
    before = "def f():\n    return "
    # The accept command arrived after the edit: the text is already there.
    after = before + "a + b\n"
    there = tracker.track("u", after, len(before), "a + b", "full")
    assert (there.start, there.end) == (len(before), len(before) + 5)
    # ...and before it: the insertion at the anchor fills the span.
    early = tracker.track("v", before, len(before), "a + b", "full")
    tracker.edited("v", len(before), len(before), 5)
    assert (early.start, early.end) == (len(before), len(before) + 5)
    # ...or replacing the typed prefix of the suggest widget's item ("t" -> "total").
    item = tracker.track("w", "self.t", 5, "total", "full")
    tracker.edited("w", 5, 6, 5)
    assert (item.start, item.end) == (5, 10)
    tracker.edited("w", 5, 5, 1)  # typed before it later: it moves, it does not grow
    assert (item.start, item.end) == (6, 11)
    # A line typed above moves both; a rewrite inside shows in the measure.
    tracker.edited("u", 0, 0, len("# note\n"))
    text = "# note\n" + after
    assert tracker.measure(there, text) == 5
    edited = text.replace("a + b", "a * b")
    start = text.index("a + b") + 2
    tracker.edited("u", start, start + 1, 1)
    assert tracker.measure(there, edited) == 4
    tracker.edited("other", 0, 0, 100)  # another document's edits do not move it
    assert tracker.measure(there, edited) == 4
    tracker.closed("u")
    assert len(tracker) == 2 and not tracker.watching(there) and tracker.watching(early)
