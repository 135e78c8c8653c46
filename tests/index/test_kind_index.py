"""The bitmap index on ``kind``: every search filters on the kind before LanceDB ranks its BM25 hits, and
the bitmap answers that filter instead of a scan of the column. Real LanceDB, made-up vectors.

It must exist wherever the text indexes do (built with them, or added when a writer opens an index
written before it had one), cover the rows each maintenance folds in, and never change an answer."""

from __future__ import annotations

from memoryd.index.columns import Filter
from memoryd.index.lock import IndexLock
from memoryd.index.store import IndexStore
from memoryd.index.terms import term_string
from support.records import rec, vecs


def kind_index(store: IndexStore):
    found = [cfg for cfg in store._table.list_indices() if cfg.columns == ["kind"]]
    return found[0] if found else None


def hits(store: IndexStore, words: str, kind: str) -> set[str]:
    return {i for i, _ in store.keyword(term_string(words, query=True), Filter().where(kind=kind), 50)}


def fill(store: IndexStore, start: int, n: int) -> None:
    kinds = ["brief" if k % 3 else "memory" for k in range(n)]
    rows = [rec(start + k, f"falcon deploy note {k}", kind, prefix=kind[0]) for k, kind in enumerate(kinds)]
    store.upsert(rows, vecs(n, seed=start), "m")


def test_built_with_the_text_indexes_and_kept_covering_new_rows(tmp_path):
    store = IndexStore(tmp_path / "index")
    fill(store, 0, 30)
    store.optimize()
    cfg = kind_index(store)
    assert cfg is not None and cfg.index_type == "Bitmap"
    assert hits(store, "falcon", "memory") == {f"m-{k:05d}" for k in range(0, 30, 3)}
    fill(store, 100, 30)  # the tail, outside every index until the next maintenance
    assert hits(store, "falcon", "memory") == {f"m-{k:05d}" for k in [*range(0, 30, 3), *range(100, 130, 3)]}
    store.optimize()
    assert store._table.index_stats(kind_index(store).name).num_unindexed_rows == 0
    assert len(hits(store, "falcon", "brief")) == 40


def test_a_writer_adds_it_to_an_index_written_before_it_had_one(tmp_path):
    index = tmp_path / "index"
    store = IndexStore(index)
    fill(store, 0, 30)
    store.optimize()
    store._table.drop_index(kind_index(store).name)
    before = hits(store, "falcon", "brief")
    reader = IndexStore(index)  # a reader does not write the index
    assert kind_index(reader) is None
    writer = IndexStore.open_writer(IndexLock(index, tmp_path / "board", command="memoryd serve"))
    try:
        assert kind_index(writer) is not None
        assert hits(writer, "falcon", "brief") == before
    finally:
        writer.close()
