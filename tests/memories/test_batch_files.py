"""The board pass of a ``store_memories`` batch: its new files are written, then fsynced together, then
linked, so each name appears only for a file already durable and the fsyncs share the file system's
journal commits; nothing of the staging is left on the board, and a staging that fails (a full disk)
leaves each store to write its own file (real files; the os calls are observed, and one write fails once).
"""

from __future__ import annotations

import errno
import os
import stat

import pytest

from memoryd.kinds.memories.files import Memory, memory_folder, read_memory, write_memory
from memoryd.kinds.memories.source import MemorySource
from memoryd.kinds.memories.writes import BoardOps


class Observed:
    """fsync and link calls on regular files, in order, by inode; the real calls run unchanged."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[tuple[str, int]] = []
        real_fsync, real_link = os.fsync, os.link

        def fsync(fd):
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode):
                self.calls.append(("fsync", st.st_ino))
            return real_fsync(fd)

        def link(src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=True):
            inode = os.stat(src, dir_fd=src_dir_fd, follow_symlinks=False).st_ino
            real_link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)
            self.calls.append(("link", inode))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "link", link)

    def linked(self) -> list[int]:
        return [inode for what, inode in self.calls if what == "link"]


@pytest.fixture
def board(tmp_path):
    path = tmp_path / "board"
    path.mkdir()
    return path


def store_batch(board, items: list[Memory]) -> list[tuple[Memory, bool, tuple[str, ...]]]:
    ops = BoardOps(board, MemorySource(board))
    with ops.batch(items):
        return [ops.store(m) for m in items]


def leftovers(board) -> list[str]:
    return sorted(n for n in os.listdir(board / "memories") if n.startswith("."))


def test_a_batch_writes_its_new_files_then_fsyncs_them_together_then_links_them(board, monkeypatch):
    old = Memory.new("a note stored before the batch", tags=("old",))
    write_memory(board, old)
    new = [Memory.new(f"batch note {n} about the zqgroup release", tags=("b",)) for n in range(6)]
    again = Memory.new(new[2].content, tags=("b", "extra"))  # the same content later in the batch
    items = [*new[:3], Memory.new(old.content, tags=("old", "more")), again, *new[3:]]
    seen = Observed(monkeypatch)

    results = store_batch(board, items)

    assert [is_new for _, is_new, _ in results] == [True, True, True, False, False, True, True, True]
    linked = seen.linked()
    assert len(linked) == len(new), "a file of the batch was linked twice, or one not new"
    synced = {inode: n for n, (what, inode) in enumerate(seen.calls) if what == "fsync"}
    first_link = next(n for n, (what, _) in enumerate(seen.calls) if what == "link")
    for inode in linked:  # each name appears for a file already durable...
        assert inode in synced and synced[inode] < first_link, seen.calls  # ...all made durable first
    assert leftovers(board) == []
    for m in new:  # each file as stored; the duplicate's tags merged into its file
        on_disk = read_memory(board, m.id)
        assert on_disk is not None and on_disk.content == m.content
    assert read_memory(board, new[2].id).tags == ("b", "extra")
    assert read_memory(board, old.id).tags == ("old", "more")
    assert os.stat(board / "memories" / f"{new[0].id}.md").st_nlink == 1


def test_a_staging_that_fails_leaves_each_store_to_write_its_own_file(board, monkeypatch):
    items = [Memory.new(f"full disk note {n}", tags=("d",)) for n in range(5)]
    real_write, writes = os.write, []

    def write(fd, data):  # the disk is full for the third file written, then has room again
        writes.append(fd)
        if len(writes) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    results = store_batch(board, items)

    assert all(is_new for _, is_new, _ in results)
    assert len(writes) == 3 + len(items), "the stores did not write their own files after the staging failed"
    for m in items:
        assert read_memory(board, m.id).content == m.content
    assert leftovers(board) == []


def test_a_file_staged_but_not_stored_is_removed_and_its_memory_left_to_the_existing_file(board):
    m = Memory.new("a note another writer creates while the batch is staged", tags=("x",))
    ops = BoardOps(board, MemorySource(board))
    with ops.batch([m]):
        with memory_folder(board) as folder:  # another writer links the same name first
            assert ops.staged.data(f"{m.id}.md", m) is not None
            other = m.with_(tags=("theirs",))
            write_memory(board, other, folder=folder)
        stored, is_new, gained = ops.store(m)
    assert not is_new and gained == ("x",)
    assert read_memory(board, m.id).tags == ("theirs", "x")
    assert leftovers(board) == []
