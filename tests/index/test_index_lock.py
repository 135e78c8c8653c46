"""The index's writer lock and owner record (:mod:`memoryd.index.lock`) and the store opened under it.

``flock`` locks belong to an open file description, so two :class:`IndexLock` objects of one process
conflict exactly as two processes do; the cross-process case runs a real second interpreter.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from memoryd.errors import AlreadyRunning, StartupError
from memoryd.index.lock import LOCK_FILE, OWNER_FILE, IndexInUse, IndexLock, IndexOfAnotherBoard, read_owner
from memoryd.index.store import IndexStore


def test_the_first_writer_records_the_board_and_a_second_is_refused_naming_it(tmp_path):
    index, board = tmp_path / "index", tmp_path / "board"
    first = IndexLock(index, board, command="memoryd search")
    first.acquire()
    assert read_owner(index) == str(board)
    assert oct(index.stat().st_mode & 0o777) == "0o700"
    second = IndexLock(index, board, command="memoryd eval")
    with pytest.raises(
        IndexInUse, match=f"in use by memoryd search \\(pid {os.getpid()}\\) for board {board}"
    ) as exc:
        second.acquire(wait_s=0.2)
    assert isinstance(exc.value, AlreadyRunning) and exc.value.holder["pid"] == os.getpid()
    first.release()
    second.acquire(wait_s=0)  # free again: taken at once
    second.release()
    assert (index / LOCK_FILE).exists()  # lock files are never deleted


def test_a_serving_daemon_holding_the_lock_refuses_at_once_even_with_a_long_wait(tmp_path):
    sock_dir = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    path = sock_dir / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(1)
        holder = IndexLock(tmp_path / "i", tmp_path / "b1", command="memoryd serve", socket=path)
        holder.acquire()
        newcomer = IndexLock(
            tmp_path / "i", tmp_path / "b2", command="memoryd serve", socket=sock_dir / "t.sock"
        )
        with pytest.raises(
            IndexInUse, match=f"owned by memoryd serve \\(pid {os.getpid()}\\) serving board"
        ) as exc:
            newcomer.acquire(wait_s=600)  # a hang here would mean it waited for a daemon that serves
        assert exc.value.holder["socket"] == str(path) and exc.value.holder["board"] == str(tmp_path / "b1")
        holder.release()
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        sock_dir.rmdir()


def test_an_index_of_another_board_is_refused_and_left_as_it_was(tmp_path):
    index = tmp_path / "index"
    with IndexLock(index, tmp_path / "one", command="memoryd search"):
        pass
    before = sorted(p.name for p in index.iterdir())
    with pytest.raises(IndexOfAnotherBoard, match="belongs to the board .*/one, not .*/two") as exc:
        IndexLock(index, tmp_path / "two", command="memoryd search").acquire()
    assert isinstance(exc.value, StartupError) and not isinstance(exc.value, AlreadyRunning)
    assert sorted(p.name for p in index.iterdir()) == before and read_owner(index) == str(tmp_path / "one")
    again = IndexLock(index, tmp_path / "one", command="memoryd search")
    again.acquire(wait_s=0)  # the refusal released the lock
    again.release()


def test_the_same_board_reached_by_another_spelling_is_the_same_owner(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with IndexLock(tmp_path / "index", tmp_path / "real", command="memoryd search"):
        pass
    with IndexLock(tmp_path / "index", tmp_path / "link", command="memoryd search"):
        pass


def test_an_index_from_before_the_owner_record_is_adopted(tmp_path):
    index = tmp_path / "index"
    IndexStore(index)  # written by an older memoryd: a table, no owner.json, no lock file
    assert not (index / OWNER_FILE).exists()
    store = IndexStore.open_writer(IndexLock(index, tmp_path / "board", command="memoryd serve"))
    assert read_owner(index) == str(tmp_path / "board") and store.count() == 0
    store.close()


def test_open_writer_releases_only_the_lock_it_took(tmp_path):
    index = tmp_path / "index"
    held = IndexLock(index, tmp_path / "board", command="memoryd serve")
    held.acquire()
    store = IndexStore.open_writer(held)  # a daemon's engine: the daemon took the lock before binding
    store.close()
    assert held.held
    with pytest.raises(IndexInUse):
        IndexStore.open_writer(IndexLock(index, tmp_path / "board", command="memoryd search"), wait_s=0)
    held.release()
    own = IndexStore.open_writer(IndexLock(index, tmp_path / "board", command="memoryd search"))
    assert own.writer is not None and own.writer.held
    own.close()
    assert not own.writer.held


def test_the_lock_is_exclusive_across_processes_and_names_the_holder(tmp_path):
    index, board = tmp_path / "index", tmp_path / "board"
    code = (
        "import sys, time; from pathlib import Path; from memoryd.index.lock import IndexLock;"
        f"IndexLock(Path({str(index)!r}), Path({str(board)!r}), command='memoryd forget').acquire();"
        "print('held', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(IndexInUse, match=f"memoryd forget \\(pid {child.pid}\\)"):
            IndexLock(index, board, command="memoryd search").acquire(wait_s=0.2)
        assert json.loads((index / LOCK_FILE).read_text())["command"] == "memoryd forget"
    finally:
        child.stdin.close()
        child.wait(30)
    with IndexLock(index, board, command="memoryd search"):  # gone with its holder
        pass


def test_wipe_keeps_the_lock_and_the_owner_record(tmp_path):
    index = tmp_path / "index"
    store = IndexStore.open_writer(IndexLock(index, tmp_path / "board", command="memoryd search"))
    store.close()
    IndexStore.wipe(index)
    assert sorted(p.name for p in index.iterdir()) == sorted([LOCK_FILE, OWNER_FILE])
    plain = tmp_path / "plain"
    IndexStore(plain)
    IndexStore.wipe(plain)
    assert not plain.exists()  # nothing of its own in it: the folder goes


def test_a_file_where_the_index_folder_should_be_is_a_clear_error(tmp_path):
    (tmp_path / "index").write_text("not a folder")
    with pytest.raises(StartupError, match="cannot create the index folder"):
        IndexLock(tmp_path / "index", tmp_path / "board", command="memoryd search").acquire()
