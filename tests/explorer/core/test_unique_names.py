"""Fresh names: never one already taken, numbered from 2, with the separator asked for."""

from __future__ import annotations

from explorer.core.unique_names import UniqueNames


def test_names_are_fresh_numbered_and_remembered() -> None:
    fresh = UniqueNames({"a", "a_2"})
    assert [fresh("a"), fresh("a"), fresh("b"), fresh("b")] == ["a_3", "a_4", "b", "b_2"]
    ids = UniqueNames(separator="#")
    assert [ids("lv"), ids("lv"), ids("lv#2")] == ["lv", "lv#2", "lv#2#2"]
