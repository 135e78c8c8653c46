"""The index's in-memory columns (``memoryd.index.columns``) against the LanceDB table they mirror.

Real LanceDB throughout. The records are made up (no model needed: the store never embeds); their
vectors are random unit vectors, so the nearest neighbours are known exactly: LanceDB's own flat scan
is the reference every in-memory answer is compared with.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from memoryd.index import columns
from memoryd.index.columns import Filter
from memoryd.index.records import Record
from memoryd.index.store import IndexStore
from memoryd.index.table import where_sql

DIM = 384
PROJECTS = ("shopfront", "payments-api", "o'brien", "")
KINDS = ("brief", "memory", "interaction")
STATUSES = ("open", "done", "")


def make_record(i: int, rng: random.Random, version: int = 0) -> Record:
    cjk = rng.random() < 0.2
    said = ("ログインがループする問題を直した " * 3) if cjk else f"fixed the login loop {i} v{version}"
    return Record(
        id=f"r-{i:05d}",
        kind=rng.choice(KINDS),
        project=rng.choice(PROJECTS),
        task=f"t-{i % 7}",
        status=rng.choice(STATUSES),
        created_at=f"2026-{1 + i % 12:02d}-01T00:00:00Z",
        title=f"title {i}",
        line=said[:40],
        text_main=f"login loop w{i % 13} v{version}",
        text_aux=f"screen{i % 5} aux",
        embed_text=said,
    )


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def lance_nearest(store: IndexStore, vector: np.ndarray, where: Filter, limit: int) -> list[str]:
    """The reference: LanceDB's own exact flat scan over rows that have a vector."""
    sql = where_sql(where)
    clause = "model != ''" + (f" AND ({sql})" if sql else "")
    got = (
        store._table.search(vector, vector_column_name="vector")
        .distance_type("dot")
        .where(clause, prefilter=True)
        .select(["id"])
        .limit(limit)
        .to_list()
    )
    return [r["id"] for r in got]


def table_rows(store: IndexStore) -> dict[str, dict]:
    cols = ["id", "kind", "project", "task", "status", "created_at", "title", "line", "lang"]
    cols += ["model", "hash", "embed_hash"]
    got = store._table.search().select([*cols, "vector"]).limit(None).to_list()
    return {r["id"]: r for r in got}


def assert_mirrors_table(store: IndexStore) -> None:
    """Every in-memory answer equals what the table holds."""
    table = table_rows(store)
    assert store.count() == len(table)
    kinds = [r["kind"] for r in table.values()]
    assert store.counts_by_kind() == {k: kinds.count(k) for k in sorted(set(kinds))}
    assert store.projects() == {r["project"] for r in table.values() if r["project"]}
    hashes = store.stored_hashes()
    assert set(hashes) == set(table)
    for i, r in table.items():
        assert (hashes[i].hash, hashes[i].embed_hash, hashes[i].model) == (
            r["hash"],
            r["embed_hash"],
            r["model"],
        )
    cols = ("id", "kind", "project", "task", "status", "created_at", "title", "line", "lang")
    mem = store.rows(sorted(table), cols)
    assert mem == {i: {c: r[c] for c in cols} for i, r in table.items()}
    vecs = store.vectors(sorted(table))
    assert set(vecs) == {i for i, r in table.items() if r["model"]}
    for i, v in vecs.items():
        assert np.array_equal(v, np.asarray(table[i]["vector"], dtype=np.float32))


@pytest.fixture
def filled(tmp_path) -> tuple[IndexStore, list[Record]]:
    rng = random.Random(7)
    recs = [make_record(i, rng) for i in range(600)]
    store = IndexStore(tmp_path / "index")
    vecs = unit_vectors(len(recs), 1)
    store.upsert(recs[:500], vecs[:500], "test-model")
    store.upsert(recs[500:], None, "")  # keyword-only rows: never a nearest neighbour
    return store, recs


@pytest.mark.parametrize("split_rows", [32_768, 64], ids=["one-thread", "split-scan"])
def test_nearest_in_memory_equals_lancedb_scan(filled, monkeypatch, split_rows):
    store, recs = filled
    monkeypatch.setattr(columns, "SPLIT_ROWS", split_rows)  # 64: the two-thread scan of big indexes
    queries = unit_vectors(12, 99)
    wheres = [
        Filter(),
        Filter().where(kind="brief"),
        Filter().where(project="payments-api", status="open"),
        Filter().where(project="o'brien"),  # a quote inside a value
        Filter().where(kind="memory").where(lang="cjk"),
        Filter().excluding(project="").where(kind="interaction"),
        Filter().where(project="nowhere"),
        Filter().where(kind=("brief", "memory")),  # one of several values
        Filter().excluding(kind=("brief", "memory"), status="open"),
    ]
    for q in queries:
        for where in wheres:
            got = [i for i, _ in store.nearest(q, where, 20)]
            assert got == lance_nearest(store, q, where, 20), where
    # cosines are the dot products of the stored float32 vectors
    q = queries[0]
    for i, cos in store.nearest(q, Filter(), 5):
        assert cos == pytest.approx(float(store.vectors([i])[i] @ q), abs=1e-5)


def test_nearest_by_groups_equal_one_filtered_scan_per_group(filled):
    store, _ = filled
    q = unit_vectors(1, 5)[0]
    groups = store.nearest_by(q, 15, Filter().where(kind="brief"), per="lang")
    assert set(groups) == {"latin", "cjk"}
    for lang, hits in groups.items():
        where = Filter().where(lang=lang, kind="brief")
        assert [i for i, _ in hits] == lance_nearest(store, q, where, 15)
    with pytest.raises(ValueError):
        store.nearest_by(q, 5, Filter().where(no_such_column="x"))


def test_updates_deletes_reopen_and_optimize_keep_memory_equal_to_the_table(tmp_path, filled):
    store, recs = filled
    rng = random.Random(11)
    assert_mirrors_table(store)
    # a batch LanceDB refuses (one id twice) changes nothing, in the table or in memory
    twice = [make_record(i, rng, version=9) for i in (3, 4, 3)]
    with pytest.raises(ValueError):
        store.upsert(twice, unit_vectors(3, 9), "test-model")
    assert_mirrors_table(store)
    # update: new text and vectors for some, a vector for keyword-only ones
    changed = [make_record(i, rng, version=1) for i in (3, 4, 550, 551)]
    store.upsert(changed, unit_vectors(len(changed), 2), "test-model")
    store.delete(["r-00010", "r-00011", "r-00555", "r-99999"])  # an unknown id is ignored
    store.upsert([make_record(i, rng) for i in range(600, 640)], None, "")
    assert_mirrors_table(store)
    q = unit_vectors(1, 3)[0]
    assert [i for i, _ in store.nearest(q, Filter(), 30)] == lance_nearest(store, q, Filter(), 30)
    assert "r-00010" not in store.rows(["r-00010"])
    store.optimize()  # a few dead rows stay in memory until they are a tenth
    assert 0 < store.mem.snap.n - store.count() < 0.1 * store.mem.snap.n
    store.delete([f"r-{i:05d}" for i in range(100, 200)])
    assert store.mem.snap.n - store.count() > 0.1 * store.mem.snap.n
    store.optimize()
    assert store.mem.snap.n == store.count()
    store.delete(["r-00201"])
    store.optimize(purge=True)  # forgotten text leaves memory at once
    assert store.mem.snap.n == store.count()
    assert "r-00201" not in store.mem.snap.buf.plain["id"]
    assert_mirrors_table(store)
    assert [i for i, _ in store.nearest(q, Filter(), 30)] == lance_nearest(store, q, Filter(), 30)
    reopened = IndexStore(store.path)
    assert_mirrors_table(reopened)
    assert reopened.stats.docs == store.stats.docs and +reopened.stats.df == +store.stats.df
    assert [i for i, _ in reopened.nearest(q, Filter(), 30)] == lance_nearest(store, q, Filter(), 30)


def test_growing_past_the_buffer_capacity(tmp_path):
    store = IndexStore(tmp_path / "index")
    rng = random.Random(3)
    total = 0
    for batch in range(5):  # 2,500 rows: past the first buffer's 1,024
        recs = [make_record(total + i, rng) for i in range(500)]
        store.upsert(recs, unit_vectors(500, batch), "m")
        total += 500
    assert_mirrors_table(store)
    q = unit_vectors(1, 42)[0]
    assert [i for i, _ in store.nearest(q, Filter(), 50)] == lance_nearest(store, q, Filter(), 50)


def test_readers_see_consistent_state_while_the_writer_churns(tmp_path):
    """Searches in several threads while the writer updates, inserts and deletes: no reader ever fails,
    and a record that is never touched is always found by its own vector, with its own row fields."""
    rng = random.Random(5)
    store = IndexStore(tmp_path / "index")
    early = [make_record(i, rng) for i in range(100, 400)]  # deleted below: the stable rows then move
    store.upsert(early, unit_vectors(300, 9), "m")
    stable = [make_record(i, rng) for i in range(50)]
    stable_vecs = unit_vectors(50, 8)
    store.upsert(stable, stable_vecs, "m")
    stop = threading.Event()
    errors: list[BaseException] = []
    checks = [0]

    def reader(seed: int) -> None:
        local = random.Random(seed)
        try:
            while not stop.is_set():
                j = local.randrange(50)
                hits = store.nearest(stable_vecs[j], Filter(), 3)
                assert hits and hits[0][0] == stable[j].id, hits
                row = store.rows([stable[j].id])[stable[j].id]
                assert row["title"] == stable[j].title and row["kind"] == stable[j].kind
                groups = store.nearest_by(stable_vecs[j], 3, Filter().where(kind=stable[j].kind), per="lang")
                assert any(h and h[0][0] == stable[j].id for h in groups.values())
                store.keyword("login loop", Filter(), 10)
                checks[0] += 1
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    try:
        for round_ in range(25):
            if stop.is_set():
                break
            ids = range(1000 + round_ * 40, 1000 + round_ * 40 + 40)
            churn = [make_record(i, rng, version=round_) for i in ids]
            store.upsert(churn, unit_vectors(40, 100 + round_), "m")
            store.upsert(churn[:10], unit_vectors(10, 500 + round_), "m")  # updates
            store.delete([r.id for r in churn[10:30]] + [r.id for r in early[round_ * 12 : round_ * 12 + 12]])
            if round_ % 3 == 2:
                store.optimize()  # compacts the in-memory copy while readers run
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert checks[0] > 0
    assert_mirrors_table(store)


def test_filters_become_sql_only_in_the_store():
    assert where_sql(Filter()) is None
    assert where_sql(Filter().where(kind="brief")) == "kind = 'brief'"
    assert where_sql(Filter().where(lang="cjk", project="o'brien").excluding(status="")) == (
        "lang = 'cjk' AND project = 'o''brien' AND status != ''"
    )
    assert where_sql(Filter().where(kind=("memory", "brief"))) == "kind IN ('brief', 'memory')"
    assert where_sql(Filter().where(project=None)) is None  # an optional argument left out
    with pytest.raises(ValueError):
        where_sql(Filter().where(kind="a", **{"kind = 'a' OR 1": "x"}))  # a column name is never SQL


def test_saved_term_statistics_are_used_only_when_they_match_the_table(tmp_path, filled):
    store, _ = filled
    rng = random.Random(13)

    def counted(path) -> tuple[int, dict]:
        """The statistics counted from the table's texts, never from the saved copy."""
        (path / "termstats.json").unlink(missing_ok=True)
        fresh = IndexStore(path)
        return fresh.stats.docs, dict(+fresh.stats.df)

    store.optimize()
    saved = store.path / "termstats.json"
    assert saved.exists()
    reopened = IndexStore(store.path)
    assert (reopened.stats.docs, dict(+reopened.stats.df)) == (store.stats.docs, dict(+store.stats.df))
    # writes after the save: the copy no longer matches the table and is not used
    store.upsert([make_record(i, rng, version=2) for i in range(20)], unit_vectors(20, 4), "m")
    store.delete(["r-00030"])
    stale = IndexStore(store.path)
    assert saved.exists()
    truth = counted(store.path)
    assert (stale.stats.docs, dict(+stale.stats.df)) == truth == (store.stats.docs, dict(+store.stats.df))
    # a broken copy is ignored
    store.optimize()
    saved.write_text('{"format": 1, "version": ')
    broken = IndexStore(store.path)
    assert (broken.stats.docs, dict(+broken.stats.df)) == counted(store.path)
