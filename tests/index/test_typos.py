"""The typo lookup on its own (no index): which edits make a term stand for another, and how it follows the
term statistics as they grow and shrink."""

from __future__ import annotations

from collections import Counter

import pytest

from memoryd.index.typos import Typos, distance, max_edits


@pytest.mark.parametrize(
    ("typed", "indexed", "edits"),
    [
        ("pasword", "password", 1),  # a letter left out
        ("postgress", "postgres", 1),  # one too many
        ("lgoin", "login", 1),  # two neighbours swapped
        ("backup", "backpu", 1),
        ("nate", "note", 2),  # a letter replaced counts two
        ("databse", "database", 1),
        ("rotaton", "rotation", 1),
    ],
)
def test_distance_counts_omissions_additions_and_swaps_as_one(typed, indexed, edits):
    assert distance(typed, indexed, 2) == edits
    assert distance(indexed, typed, 2) == edits


def test_distance_stops_past_its_bound():
    assert distance("elephants", "dancing", 1) == 2
    assert distance("abcdefgh", "abcdefghijk", 2) == 3


def test_short_odd_or_long_terms_are_never_corrected():
    assert [max_edits(t) for t in ("pnpm", "api", "k8s", "v2", "backup", "kubernetes")] == [1, 0, 0, 0, 1, 2]
    assert max_edits("x" * 25) == 0


def test_near_offers_the_closest_then_the_most_common_with_the_same_first_letter():
    df = Counter({"password": 3, "passwords": 1, "passport": 5, "login": 2, "plogin": 1, "manager": 1})
    typos = Typos()
    assert typos.near("pasword", df) == ["password"]
    assert typos.near("lgoin", df) == ["login"]  # "plogin" starts with another letter
    assert typos.near("manger", df) == ["manager"]
    assert typos.near("wibble", df) == []
    assert typos.near("hike", Counter({"like": 4, "hide": 2})) == []  # a replaced letter is two edits


def test_near_follows_the_statistics_as_terms_come_and_go():
    df: Counter[str] = Counter({"staging": 1})
    typos = Typos()
    assert typos.near("databse", df) == []
    df.update(["database"])  # a new record's terms
    assert typos.near("databse", df) == ["database"]
    df.subtract(["database"])  # its record deleted: the key stays, counted down to 0
    assert typos.near("databse", df) == []
    assert typos.near("databse", Counter({"database": 2})) == ["database"]  # a reloaded statistics object
