"""Word diffs, checked against hand-worked examples."""

from __future__ import annotations

from webapp.textdiff import Segment, changed_words, word_diff


def test_one_word_replaced() -> None:
    segs = word_diff("Your refund is on its way.", "Your credit is on its way.")
    assert segs == [
        Segment("equal", "Your "),
        Segment("delete", "refund"),
        Segment("insert", "credit"),
        Segment("equal", " is on its way."),
    ]
    assert changed_words(segs) == (1, 1)


def test_both_sides_rebuild_exactly() -> None:
    old, new = "Hi Dana,\nthe add-on renews yearly.", "Hi Dana, the add-on renews on its own cycle. Thanks!"
    segs = word_diff(old, new)
    assert "".join(s.text for s in segs if s.op != "insert").replace("\n", " ") == old.replace("\n", " ")
    assert "".join(s.text for s in segs if s.op != "delete") == new
    assert changed_words(segs) == (1, 5)


def test_missing_text_is_all_insert() -> None:
    assert word_diff(None, "hello there") == [Segment("insert", "hello there")]
    assert word_diff("gone", None) == [Segment("delete", "gone")]
