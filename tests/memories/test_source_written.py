"""MemorySource.written: a memory this daemon just created reaches the writer without its file being read
again, but only while the file is exactly as written (real files; sys audit hooks see every open)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from memoryd.kinds.memories.files import Memory, memory_path, write_memory
from memoryd.kinds.memories.format import render_memory
from memoryd.kinds.memories.records import memory_record
from memoryd.kinds.memories.source import MemorySource

_opened: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], str | bytes | os.PathLike):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # hooks cannot be removed; it records only while a test sets _opened


def _records_for(source: MemorySource, memory: Memory) -> tuple[list, list[str]]:
    """The batch's records for ``memory``'s file, and the names opened meanwhile."""
    global _opened
    _opened = []
    try:
        batch = source.records_for([memory_path(memory.id)])
    finally:
        opened, _opened = _opened, None
    return batch.records, opened


@pytest.fixture
def board(tmp_path):
    path = tmp_path / "board"
    path.mkdir()
    return path


@pytest.fixture
def source(board) -> MemorySource:
    return MemorySource(board)


def _store(board, source: MemorySource, memory: Memory):
    path, is_new = write_memory(board, memory, echo=False)
    assert is_new
    source.written(memory, path)
    return path


def test_an_unchanged_file_is_taken_as_written_without_reading_it(board, source):
    memory = Memory.new("the deploy key lives in the vault", tags=("ops", "deploy"))
    _store(board, source, memory)
    records, opened = _records_for(source, memory)
    assert records == [memory_record(memory)]
    assert not any(name.endswith(f"{memory.id}.md") for name in opened), opened
    assert source.get(memory.id) == memory  # the view holds it as a read would
    # taken once: the next time that file comes round it is read again
    records, opened = _records_for(source, memory)
    assert records == [memory_record(memory)]
    assert any(name.endswith(f"{memory.id}.md") for name in opened), opened


def test_a_file_changed_after_the_write_is_read_as_it_is_now(board, source):
    memory = Memory.new("ship the release on friday", tags=("release",))
    path = _store(board, source, memory)
    time.sleep(0.01)  # a coarse clock could give the edit the write's times; the inode change still tells
    edited = memory.with_(tags=("release", "edited-by-hand"))
    tmp = path.with_name(".edit.tmp")
    tmp.write_text(render_memory(edited), encoding="utf-8")
    os.replace(tmp, path)  # an editor's save: a new inode under the same name
    records, opened = _records_for(source, memory)
    assert records == [memory_record(edited)]
    assert any(name.endswith(f"{memory.id}.md") for name in opened), opened
    assert source.get(memory.id).tags == ("release", "edited-by-hand")


def test_a_file_rewritten_in_place_is_read_as_it_is_now(board, source):
    memory = Memory.new("the cache is warmed at start", tags=("cache",))
    path = _store(board, source, memory)
    edited = memory.with_(importance=9, tags=("cache", "x"))
    path.write_text(render_memory(edited), encoding="utf-8")  # same inode, new size and times
    records, _ = _records_for(source, memory)
    assert records == [memory_record(edited)]


def test_a_broken_or_removed_file_is_what_the_writer_sees(board, source):
    broken = Memory.new("this file gets broken after its write")
    gone = Memory.new("this file is removed after its write")
    _store(board, source, broken).write_text("no front matter at all\n", encoding="utf-8")
    _store(board, source, gone).unlink()
    batch = source.records_for([memory_path(broken.id), memory_path(gone.id)])
    assert batch.records == []
    assert [s.path for s in batch.skipped] == [memory_path(broken.id)]
    assert source.get(broken.id) is None and source.get(gone.id) is None


def test_an_access_time_touch_rewrites_the_files_and_the_writer_takes_them_as_written(board, source):
    from memoryd.kinds.memories.writes import BoardOps

    first = Memory.new("the queue drains at midnight", tags=("ops",), created_at="2026-01-02T03:04:05Z")
    second = Memory.new("the cron runs in UTC", created_at="2026-01-02T03:04:05Z")
    for memory in (first, second):
        _store(board, source, memory)
        _records_for(source, memory)  # the store's own hand-over is used up
    later, earlier = "2026-05-06T07:08:09Z", "2025-12-31T00:00:00Z"
    BoardOps(board, source).touch({first.id: later, second.id: earlier})
    assert f"accessed_at: '{later}'" in (board / memory_path(first.id)).read_text()
    assert "2025-12-31" not in (board / memory_path(second.id)).read_text()  # never backwards
    records, opened = _records_for(source, first)
    assert records == [memory_record(first)]  # the access time is not part of the record
    assert not any(name.endswith(f"{first.id}.md") for name in opened), opened
    assert source.get(first.id).accessed_at == later
