"""A no-change restart derives no brief record again; any change to a brief's inputs does (real board,
real LanceDB, keyword-only so no model is needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.core.indexer import Indexer  # noqa: E402
from memoryd.index.derive_cache import FILE_NAME  # noqa: E402
from memoryd.index.search import search  # noqa: E402
from memoryd.index.searcher import (
    RWLock,  # noqa: E402
    SearchQuery,  # noqa: E402
)
from memoryd.index.store import IndexStore  # noqa: E402
from memoryd.kinds.briefs.source import BriefSource  # noqa: E402
from support.board import write_brief, write_task  # noqa: E402

IDS = ["b-20260101-aaaaa1", "b-20260101-aaaaa2", "b-20260101-aaaaa3"]


@pytest.fixture
def board(tmp_path: Path) -> Path:
    root = tmp_path / "board"
    (root / "tasks").mkdir(parents=True)
    (root / "briefs").mkdir()
    write_task(root)
    for i, bid in enumerate(IDS):
        write_brief(root, bid, said=f"the checkout button number {i} does nothing")
    return root


def restart(board: Path, index: Path):
    """A fresh process's view: new store, new indexer, one full sync."""
    store = IndexStore(index)
    indexer = Indexer(store, lambda: None, RWLock(), sources=[BriefSource(board)])
    report = indexer.full_sync()
    return store, indexer, report


def test_no_change_restart_derives_nothing_and_changes_are_derived(board, tmp_path):
    index = tmp_path / "index"
    _, first, report = restart(board, index)
    assert (first.last_derived, report.added) == (3, 3)

    store, again, report = restart(board, index)
    assert (again.last_derived, report.unchanged, report.changed) == (0, 3, False)
    assert store.count() == 3
    assert [h.id for h in search(store, None, SearchQuery("checkout button number 2")).hits][:1] == [IDS[2]]

    (board / "briefs" / IDS[1] / "said.txt").write_text("the basket total is wrong", encoding="utf-8")
    store, _, report = restart(board, index)
    assert (report.updated, report.unchanged) == (1, 2)
    assert [h.id for h in search(store, None, SearchQuery("basket total")).hits][:1] == [IDS[1]]

    task = board / "tasks" / "t-20260101-aaaaaa.json"
    data = json.loads(task.read_text())
    task.write_text(json.dumps({**data, "status": "done"}))
    _, again, report = restart(board, index)
    assert (again.last_derived, report.updated) == (3, 3)  # the task's status lives in every brief record

    import shutil

    shutil.rmtree(board / "briefs" / IDS[0])
    store, again, report = restart(board, index)
    assert (again.last_derived, report.deleted, report.unchanged) == (0, 1, 2)
    assert store.count() == 2


@pytest.mark.parametrize("content", ["{not json", json.dumps({"stamp": "other", "entries": {}}), ""])
def test_a_broken_or_foreign_cache_file_means_derive_everything(board, tmp_path, content):
    index = tmp_path / "index"
    restart(board, index)
    (index / FILE_NAME).write_text(content, encoding="utf-8")
    _, again, report = restart(board, index)
    assert (again.last_derived, report.unchanged, report.changed) == (3, 3, False)
    _, again, _ = restart(board, index)
    assert again.last_derived == 0  # and the cache is written again


def test_a_wiped_index_is_rebuilt_even_with_the_cache_file_left(board, tmp_path):
    index = tmp_path / "index"
    restart(board, index)
    cache = (index / FILE_NAME).read_bytes()
    import shutil

    shutil.rmtree(index)
    index.mkdir()
    (index / FILE_NAME).write_bytes(cache)
    store, again, report = restart(board, index)
    assert (again.last_derived, report.added, store.count()) == (3, 3, 3)


def test_memories_are_derived_again_only_when_what_their_record_reads_changed(tmp_path):
    from memoryd.kinds.memories.files import Memory, read_memory, write_memory
    from memoryd.kinds.memories.source import MemorySource

    board, index = tmp_path / "board", tmp_path / "index"
    board.mkdir()
    long_text = " ".join(f"readSession{i % 97} retries the upload" for i in range(3000))
    kept = [Memory.new(long_text, tags=("upload",)), Memory.new("the staging database is postgres 16")]
    for m in kept:
        write_memory(board, m)

    def restart_memories():
        store = IndexStore(index)
        indexer = Indexer(store, lambda: None, RWLock(), sources=[MemorySource(board)])
        return store, indexer, indexer.full_sync()

    _, first, report = restart_memories()
    assert (first.last_derived, report.added) == (2, 2)
    store, again, report = restart_memories()
    assert (again.last_derived, report.unchanged, report.changed) == (0, 2, False)
    assert [h.id for h in search(store, None, SearchQuery("readsession42 upload")).hits][:1] == [kept[0].id]

    # a touch of what only re-ranks (importance, accessed_at) derives nothing; a new tag does
    m = read_memory(board, kept[1].id)
    write_memory(board, m.with_(importance=5, accessed_at="2026-12-01T00:00:00Z"), overwrite=True)
    _, again, report = restart_memories()
    assert (again.last_derived, report.changed) == (0, False)
    write_memory(board, m.with_(tags=("database",)), overwrite=True)
    store, again, report = restart_memories()
    assert (again.last_derived, report.updated, report.unchanged) == (1, 1, 1)
    assert [h.id for h in search(store, None, SearchQuery("database")).hits][:1] == [kept[1].id]


def test_a_records_content_hash_is_the_one_earlier_versions_stored():
    """The stored hashes of an index written before stay valid: equal fields, equal hash (pinned), until
    :data:`~memoryd.index.records.RECORD_FORMAT` changes on purpose (2: every record is derived again)."""
    from memoryd.index.records import RECORD_FORMAT, Record

    rec = Record(*[f"field {i} ü 日本" for i in range(11)])
    assert RECORD_FORMAT == 2
    assert rec.content_hash == "f3887e2efd05ff03fc76954be882ab701aede24fa62a78e2a50c42eaeb35a137"
