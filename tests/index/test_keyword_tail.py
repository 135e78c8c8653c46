"""The keyword tail: rows written since the text indexes were refreshed are found at once, exactly once.

Real LanceDB (no model needed: records carry made-up vectors). A row must be returned by the keyword
half as soon as its write returns, never twice (tail and index both holding it, as while a refresh
finishes), and never after its delete; a reader of a folder whose writer died before refreshing finds
the rows too.
"""

from __future__ import annotations

import pytest

from memoryd.index.columns import ANY_ROW, Filter
from memoryd.index.store import IndexStore
from memoryd.index.terms import term_string
from support.records import rec, vecs


def ids(store: IndexStore, words: str, where: Filter = ANY_ROW, limit: int = 50) -> list[str]:
    got = [i for i, _ in store.keyword(term_string(words, query=True), where, limit)]
    assert len(got) == len(set(got)), got  # never a row twice
    return got


def filled(tmp_path) -> IndexStore:
    store = IndexStore(tmp_path / "index")
    base = [rec(i, f"deploy pipeline note {i} about caching") for i in range(30)]
    store.upsert(base, vecs(30), "m")
    store.optimize()  # the text indexes exist and cover these rows
    assert len(store.tail) == 0
    return store


def test_rows_written_after_the_refresh_are_found_at_once_and_once(tmp_path):
    store = filled(tmp_path)
    store.upsert([rec(100, "zebrafish protocol for the staging cluster")], vecs(1, 2), "m")
    assert "r-00100" in store.tail
    assert ids(store, "zebrafish") == ["r-00100"]
    assert "r-00100" in ids(store, "staging caching")  # a tail row and indexed rows in one answer
    # stemming as the index does it: "protocols" matches "protocol"
    assert ids(store, "protocols") == ["r-00100"]
    # filters apply to tail rows as to indexed ones
    store.upsert([rec(101, "zebrafish in another project", project="q")], vecs(1, 3), "m")
    assert ids(store, "zebrafish", Filter().where(project="q")) == ["r-00101"]
    assert set(ids(store, "zebrafish")) == {"r-00100", "r-00101"}
    store.refresh()
    assert len(store.tail) == 0
    assert set(ids(store, "zebrafish")) == {"r-00100", "r-00101"}


def test_an_updated_row_answers_by_its_new_words_only(tmp_path):
    store = filled(tmp_path)
    store.upsert([rec(3, "completely rewritten okapi text")], vecs(1, 4), "m")  # was indexed
    assert ids(store, "okapi") == ["r-00003"]
    assert "r-00003" not in ids(store, "pipeline note 3")  # its old text is gone
    store.upsert([rec(3, "rewritten again narwhal")], vecs(1, 5), "m")  # now in the tail: replaced there
    assert ids(store, "okapi") == []
    assert ids(store, "narwhal") == ["r-00003"]


def test_a_deleted_row_is_never_returned(tmp_path):
    store = filled(tmp_path)
    store.upsert([rec(200, "quokka survey results")], vecs(1, 6), "m")
    assert ids(store, "quokka") == ["r-00200"]
    store.delete(["r-00200", "r-00005"])  # one from the tail, one from the indexes
    assert ids(store, "quokka") == []
    assert "r-00005" not in ids(store, "deploy pipeline note 5")
    store.refresh()
    assert ids(store, "quokka") == []


def test_a_refresh_finishing_during_a_query_returns_no_row_twice(tmp_path):
    store = filled(tmp_path)
    store.upsert([rec(300, "axolotl migration plan")], vecs(1, 7), "m")
    # the indexes now cover the row while the tail still holds it: the moment a refresh commits
    store._table.optimize()
    assert "r-00300" in store.tail
    assert ids(store, "axolotl") == ["r-00300"]
    assert ids(store, "axolotl migration deploy").count("r-00300") == 1


def test_a_reader_finds_rows_a_dead_writer_never_refreshed(tmp_path):
    store = filled(tmp_path)
    store.upsert([rec(400, "pangolin incident review")], vecs(1, 8), "m")
    # the writer dies here (no refresh, no close): the row is in LanceDB, outside the text indexes
    reader = IndexStore(tmp_path / "index")
    assert len(reader.tail) == 0
    assert ids(reader, "pangolin") == ["r-00400"]


def test_the_first_rows_of_an_empty_index_are_found(tmp_path):
    store = IndexStore(tmp_path / "index")
    store.upsert([rec(1, "first ever memory about wombats")], vecs(1, 9), "m")
    assert ids(store, "wombats") == ["r-00001"]
    store.upsert([rec(2, "second memory about wombats")], vecs(1, 10), "m")
    assert set(ids(store, "wombats")) == {"r-00001", "r-00002"}


def test_indexed_rows_outnumbered_by_the_tail_score_as_tail_rows_do(tmp_path):
    # A new store between two refreshes: LanceDB's figures come from its 3 indexed rows, so its hits are
    # scored in memory like the tail's. An indexed row and a tail row with the same text score the same.
    store = IndexStore(tmp_path / "index")
    texts = ["heron survey of the estuary", "budget review", "heron nest"]
    store.upsert([rec(1 + i, t) for i, t in enumerate(texts)], vecs(3, 11), "m")
    store.optimize()
    tail_rows = [rec(10 + i, f"kestrel count number {i}") for i in range(4)]
    copies = [rec(20, texts[0]), rec(21, texts[2])]
    store.upsert([*tail_rows, *copies], vecs(6, 12), "m")
    store.upsert([rec(2, "budget review heron")], vecs(1, 13), "m")  # an indexed row, now held by the tail
    assert len(store.tail) == 7
    got = dict(store.keyword(term_string("heron survey", query=True), ANY_ROW, 10))
    assert set(got) == {"r-00001", "r-00002", "r-00003", "r-00020", "r-00021"}
    assert got["r-00001"] == pytest.approx(got["r-00020"], rel=1e-9)
    assert got["r-00003"] == pytest.approx(got["r-00021"], rel=1e-9)
    assert got["r-00003"] < got["r-00001"]
    store.refresh()
    assert len(store.tail) == 0
    after = dict(store.keyword(term_string("heron survey", query=True), ANY_ROW, 10))
    assert set(after) == set(got)


class SlowFold:
    """The table's own ``optimize``, held open after its work until the test lets it end, so writes can
    be made while a fold is running."""

    def __init__(self, table) -> None:
        import threading

        self.optimize = table.optimize
        self.done_work = threading.Event()
        self.finish = threading.Event()

    def __call__(self, *args, **kwargs):
        out = self.optimize(*args, **kwargs)
        self.done_work.set()
        assert self.finish.wait(30), "the test never let the fold end"
        return out


def test_appends_go_on_beside_a_fold_and_their_rows_stay_in_the_tail(tmp_path):
    import threading

    store = filled(tmp_path)
    store.upsert([rec(500, "kiwifruit harvest report")], vecs(1, 11), "m")  # the tail the fold covers
    slow = SlowFold(store._table)
    store._table.optimize = slow
    fold = threading.Thread(target=store.refresh)
    fold.start()
    try:
        assert slow.done_work.wait(30)
        # the fold is still running: an append of a new row does not wait for it
        store.upsert([rec(501, "kiwifruit export license")], vecs(1, 12), "m")
        assert fold.is_alive()
        assert set(ids(store, "kiwifruit")) == {"r-00500", "r-00501"}
    finally:
        slow.finish.set()
        fold.join(30)
    assert "r-00500" not in store.tail  # folded into the text indexes
    assert "r-00501" in store.tail  # written during the fold: the tail keeps it until the next one
    assert set(ids(store, "kiwifruit")) == {"r-00500", "r-00501"}
    assert store.count() == 32
    store.refresh()
    assert len(store.tail) == 0 and set(ids(store, "kiwifruit")) == {"r-00500", "r-00501"}


@pytest.mark.parametrize("write", ["merge", "delete"])
def test_a_merge_or_a_delete_waits_for_the_fold_running(tmp_path, write):
    import threading

    store = filled(tmp_path)
    store.upsert([rec(600, "tamarind supply chain")], vecs(1, 13), "m")
    slow = SlowFold(store._table)
    store._table.optimize = slow
    fold = threading.Thread(target=store.refresh)
    fold.start()
    ended: list[str] = []

    def run() -> None:
        if write == "merge":  # a row the fold is compacting, rewritten
            store.upsert([rec(4, "tamarind rewritten note")], vecs(1, 14), "m")
        else:
            store.delete(["r-00004"])
        ended.append(write)

    try:
        assert slow.done_work.wait(30)
        writer = threading.Thread(target=run)
        writer.start()
        writer.join(0.5)
        assert writer.is_alive() and not ended, f"the {write} did not wait for the fold"
    finally:
        slow.finish.set()
        fold.join(30)
    writer.join(30)
    assert ended == [write]
    if write == "merge":
        assert set(ids(store, "tamarind")) == {"r-00004", "r-00600"}
    else:
        assert "r-00004" not in ids(store, "deploy pipeline note 4")
        assert store.count() == 30
