"""Single-instance primitives with real processes and real sockets: flock locks, stale sockets, socket dirs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from memoryd.errors import AlreadyRunning, SocketPathError, StartupError
from memoryd.serve import lock, socketfile

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memoryd.serve.lock import FileLock
    lock = FileLock(Path(sys.argv[1]), directory=sys.argv[2] == "dir")
    assert lock.try_acquire(note="pid holder")
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
    """
)


@pytest.fixture
def short_dir():
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="md-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def hold_lock(path: Path, seconds: float = 30, directory: bool = False) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), "dir" if directory else "file", str(seconds)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout.readline() == b"held\n"
    return proc


def test_lock_is_exclusive_across_processes_and_dies_with_its_holder(short_dir):
    path = short_dir / "s.sock.lock"
    holder = hold_lock(path)
    try:
        mine = lock.FileLock(path)
        assert mine.try_acquire() is False
        assert mine.holder_note() == "pid holder"
        holder.kill()  # kill -9: the kernel drops the flock with the process
        holder.wait(10)
        assert mine.try_acquire() is True
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        mine.release()
        assert path.exists()  # lock files are never deleted
    finally:
        holder.kill()


def test_directory_lock_guards_a_board(short_dir):
    board = short_dir / "board"
    board.mkdir()
    holder = hold_lock(board, directory=True)
    try:
        assert lock.FileLock(board, directory=True).try_acquire() is False
    finally:
        holder.kill()
        holder.wait(10)
    assert lock.FileLock(board, directory=True).try_acquire() is True
    assert os.listdir(board) == []  # nothing written into the board


def test_lock_file_that_is_a_symlink_is_refused(short_dir):
    target = short_dir / "elsewhere"
    target.write_text("keep")
    (short_dir / "s.sock.lock").symlink_to(target)
    with pytest.raises(StartupError):
        lock.acquire(lock.FileLock(short_dir / "s.sock.lock"), short_dir / "s.sock", what="x", wait_s=0)
    assert target.read_text() == "keep"


def test_acquire_refuses_at_once_when_the_holder_is_serving(short_dir):
    path, sock_path = short_dir / "s.sock.lock", short_dir / "s.sock"
    holder = hold_lock(path)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    listener.listen()
    try:
        started = time.monotonic()
        with pytest.raises(AlreadyRunning, match="already running.*pid holder"):
            lock.acquire(lock.FileLock(path), sock_path, what="socket", wait_s=10)
        assert time.monotonic() - started < 2
        with pytest.raises(AlreadyRunning) as refused:  # as the daemon names its socket's lock
            lock.acquire(lock.FileLock(path), sock_path, what=f"socket {sock_path}", wait_s=10)
        assert str(refused.value).count(str(sock_path)) == 1, refused.value
    finally:
        listener.close()
        holder.kill()


def test_acquire_waits_for_a_holder_that_is_shutting_down(short_dir):
    path = short_dir / "s.sock.lock"
    holder = hold_lock(path, seconds=0.5)  # socket already gone, lock released half a second later
    try:
        mine = lock.FileLock(path)
        lock.acquire(mine, short_dir / "s.sock", what="socket", wait_s=10)
        assert mine.held
    finally:
        holder.kill()


def test_acquire_gives_up_on_a_holder_that_never_serves(short_dir):
    holder = hold_lock(short_dir / "s.sock.lock")
    try:
        started = time.monotonic()
        with pytest.raises(AlreadyRunning, match="does not answer"):
            lock.acquire(
                lock.FileLock(short_dir / "s.sock.lock"), short_dir / "s.sock", what="socket", wait_s=0.3
            )
        assert time.monotonic() - started < 2
    finally:
        holder.kill()


HOLD_BOARD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memoryd.serve import lock
    board = Path(sys.argv[1])
    held = lock.FileLock(board, directory=True)
    assert held.try_acquire()
    lock.write_board_note(board, socket_path=Path(sys.argv[2]), index=Path(sys.argv[3]))
    print("held", flush=True)
    time.sleep(30)
    """
)


def test_a_board_holder_that_does_not_answer_is_named_after_the_wait(short_dir):
    """A holder that wrote its note but answers on no socket (starting, stopping or stuck) is named by pid,
    socket and index once the wait is over."""
    board = short_dir / "board"
    board.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_BOARD, str(board), str(short_dir / "h.sock"), str(short_dir / "hidx")],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        assert lock.read_board_note(board)["pid"] == holder.pid
        with pytest.raises(AlreadyRunning) as refused:
            lock.acquire(
                lock.FileLock(board, directory=True),
                short_dir / "s.sock",
                what=f"board {board}",
                wait_s=0.3,
                holder_of=lambda: lock.board_holder(board, None, short_dir / "s.sock"),
            )
        said = str(refused.value)
        assert f"board {board} is held by memoryd serve (pid {holder.pid}) on {short_dir / 'h.sock'}" in said
        assert f"with the index {short_dir / 'hidx'}, which does not answer" in said, said
        assert f"kill {holder.pid}" in said, said
    finally:
        holder.kill()
        holder.wait(10)
    assert lock.read_board_note(board) == {}  # its holder is gone: the note left behind names no one


@pytest.mark.parametrize("change", ["host", "board", "pid", "symlink", "junk"])
def test_a_board_note_about_anyone_but_a_live_holder_here_is_ignored(short_dir, change):
    board = short_dir / "board"
    board.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        note = {
            "pid": sleeper.pid,
            "command": "memoryd serve",
            "host": socket.gethostname(),
            "board": str(board),
        }
        path = board / lock.BOARD_NOTE
        path.write_text(json.dumps(note))
        assert lock.read_board_note(board)["pid"] == sleeper.pid
        if change == "host":  # a board synced from another machine
            path.write_text(json.dumps({**note, "host": "elsewhere"}))
        elif change == "board":  # a board copied with its note
            path.write_text(json.dumps({**note, "board": str(short_dir / "other")}))
        elif change == "pid":  # its daemon was killed
            sleeper.kill()
            sleeper.wait(10)
        elif change == "symlink":
            (short_dir / "planted.json").write_text(json.dumps(note))
            path.unlink()
            path.symlink_to(short_dir / "planted.json")
        else:
            path.write_bytes(b"\xff" * 10_000)
        assert lock.read_board_note(board) == {}
    finally:
        sleeper.kill()
        sleeper.wait(10)


# --- stale sockets ---------------------------------------------------------------------------------------


def test_stale_socket_is_replaced_only_once_proven_dead(short_dir):
    path = short_dir / "s.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # a socket file with no listener: what kill -9 leaves
    assert socketfile.replace_stale(path) is True
    assert not path.exists()
    assert socketfile.replace_stale(path) is False  # nothing there: nothing to do


def test_live_socket_is_never_taken_over(short_dir):
    path = short_dir / "s.sock"
    live = socket.socket(socket.AF_UNIX)
    live.bind(str(path))
    live.listen()
    try:
        with pytest.raises(AlreadyRunning):
            socketfile.replace_stale(path)
        assert stat.S_ISSOCK(path.lstat().st_mode)
    finally:
        live.close()


@pytest.mark.parametrize("kind", ["file", "symlink-to-socket", "directory", "fifo"])
def test_anything_but_a_socket_is_never_removed(short_dir, kind):
    path = short_dir / "s.sock"
    if kind == "file":
        path.write_text("data")
    elif kind == "symlink-to-socket":
        real = socket.socket(socket.AF_UNIX)
        real.bind(str(short_dir / "real.sock"))
        real.close()
        path.symlink_to(short_dir / "real.sock")
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    before = path.lstat()
    with pytest.raises(SocketPathError, match="will not remove it"):
        socketfile.replace_stale(path)
    after = path.lstat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_bind_makes_a_0600_socket_and_removes_only_its_own(short_dir):
    bound = socketfile.bind(short_dir / "s.sock")
    try:
        assert stat.S_IMODE((short_dir / "s.sock").lstat().st_mode) == 0o600
        assert socketfile.describe(short_dir / "s.sock")["mode"] == "0600"
    finally:
        bound.sock.close()
    (short_dir / "s.sock").unlink()
    (short_dir / "s.sock").write_text("someone else's now")
    assert bound.remove_file() is False
    assert (short_dir / "s.sock").read_text() == "someone else's now"


def test_a_removed_socket_never_removes_the_next_daemons_socket_that_reuses_its_inode_number(short_dir):
    """A stopping daemon removes its socket, releases its locks, and removes "its" socket once more on
    the way out; a daemon started meanwhile has bound the path, and the kernel may give the new file the
    freed inode number (seen: the agent's restarted daemon lost its socket and never answered again)."""
    old = socketfile.bind(short_dir / "s.sock")
    old.sock.close()
    assert old.remove_file() is True
    new = socketfile.bind(short_dir / "s.sock")
    try:
        # the kernel's reuse of the freed inode number, which a test cannot force: same device, same inode
        old.dev, old.ino = new.dev, new.ino
        assert old.remove_file() is False
        assert stat.S_ISSOCK((short_dir / "s.sock").lstat().st_mode), "the new daemon's socket was removed"
    finally:
        new.sock.close()
        assert new.remove_file() is True


def test_bind_refuses_a_path_longer_than_sun_path(short_dir):
    deep = short_dir / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    with pytest.raises(SocketPathError, match="limit is 103"):
        socketfile.bind(deep / "s.sock")


# --- socket directory --------------------------------------------------------------------------------------


def test_socket_dir_is_created_0700(short_dir):
    target = short_dir / "a" / "b"
    socketfile.ensure_socket_dir(target, ours=True)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


def test_a_loose_socket_dir_is_tightened_only_when_it_is_ours(short_dir):
    loose = short_dir / "state"
    loose.mkdir()
    loose.chmod(0o755)
    with pytest.raises(SocketPathError, match="chmod 700"):
        socketfile.ensure_socket_dir(loose, ours=False)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o755
    socketfile.ensure_socket_dir(loose, ours=True)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700


def test_serve_on_a_shared_sticky_folder_suggests_a_private_folder_never_a_chmod_of_it(short_dir):
    """``memoryd serve --socket /tmp/x.sock``: /tmp is everyone's; the fix is a folder of one's own."""
    shared = short_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    env = {**os.environ, "MEMORYD_HOME": str(short_dir / "mh")}
    done = subprocess.run([sys.executable, "-m", "memoryd", "serve", "--socket", str(shared / "md2.sock"),
                           "--model", "none"], capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 1, done
    said = [line for line in done.stderr.splitlines() if line.startswith("memoryd: ")]
    assert len(said) == 1 and "mode 1777" in said[0], done.stderr
    assert "mkdir -m 700 ~/.memoryd" in said[0] and "--socket ~/.memoryd/memoryd.sock" in said[0], said
    assert "chmod" not in said[0], said
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777 and not (shared / "md2.sock").exists()


def test_a_symlinked_socket_dir_is_refused(short_dir):
    real = short_dir / "real"
    real.mkdir(mode=0o700)
    (short_dir / "link").symlink_to(real)
    with pytest.raises(SocketPathError, match="not a real directory"):
        socketfile.ensure_socket_dir(short_dir / "link", ours=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory owned by someone else")
def test_a_socket_dir_owned_by_someone_else_is_refused(short_dir):
    foreign = short_dir / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 65534, 65534)
    with pytest.raises(SocketPathError, match="owned by uid 65534"):
        socketfile.ensure_socket_dir(foreign, ours=True)


def test_concurrent_acquirers_in_threads_of_one_process_do_not_both_win(short_dir):
    # flock is per open file description: two FileLock objects in one process still exclude each other.
    path = short_dir / "s.sock.lock"
    results: list[bool] = []
    locks = [lock.FileLock(path) for _ in range(8)]
    threads = [threading.Thread(target=lambda fl=fl: results.append(fl.try_acquire())) for fl in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1


EXCLUSIVE = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from memoryd.locks import FileLock
    path, inside, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.001)
    for _ in range(3000):
        lock = FileLock(path)
        if lock.try_acquire():
            os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # exists: two holders at once
            os.unlink(inside)
            lock.release(remove=True)
    """
)


def test_a_lock_file_deleted_by_its_holder_never_gives_two_holders(short_dir):
    # A taker that opened the file before its holder deleted it would lock the deleted inode while a newcomer
    # locks a new file; re-checking the file after flock closes that. Four processes race 3,000 rounds each.
    path, inside, go = short_dir / "s.sock.lock", short_dir / "inside", short_dir / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", EXCLUSIVE, str(path), str(inside), str(go)], stderr=subprocess.PIPE
        )
        for _ in range(4)
    ]
    go.touch()
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    assert not path.exists()


def test_release_removes_the_lock_file_only_when_asked_and_only_its_own(short_dir):
    path = short_dir / "s.sock.lock"
    kept = lock.FileLock(path)
    assert kept.try_acquire(note="pid 1")
    kept.release()
    assert path.read_text() == "pid 1"  # a daemon that served leaves its lock file
    removed = lock.FileLock(path)
    assert removed.try_acquire()
    removed.release(remove=True)
    assert not path.exists()
    replaced = lock.FileLock(path)
    assert replaced.try_acquire()
    path.unlink()
    path.write_text("someone else's")  # not the file we locked: never removed
    replaced.release(remove=True)
    assert path.read_text() == "someone else's"
