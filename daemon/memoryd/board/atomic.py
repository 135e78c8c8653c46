"""Atomic writes inside a board folder opened through the gate: temp dotfile + fsync + rename (or link).

Every board write (outcomes, memories, session summaries and rewrites) goes through here, so a crash
leaves either the old file or the new one, never half of one, and a symlink planted at the target name is
replaced, never followed (rename(2) and link(2) act on the directory entry).

Temp names are ``.<name>.<pid>-<12 hex>.tmp`` (:func:`temp_name`): the writer's pid lets the next daemon
start tell a temp left by a killed writer from one being written right now (:mod:`memoryd.core.sweep`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator

from memoryd.board.gate import SafeDir, UnsafePath

#: Mode of every file memoryd writes on the board.
FILE_MODE = 0o600
# ".<name>.<pid>-<12 hex>.tmp"; before the pid was added: ".<name>.<12 hex>.tmp" (pid None).
_TEMP_RE = re.compile(r"\.(?P<name>.+?)\.(?:(?P<pid>[1-9][0-9]{0,9})-)?[0-9a-f]{12}\.tmp", re.ASCII)


def temp_name(name: str) -> str:
    """A fresh temp name for a write of ``name`` by this process: ``.<name>.<pid>-<12 hex>.tmp``."""
    return f".{name}.{os.getpid()}-{secrets.token_hex(6)}.tmp"


def parse_temp_name(tmp: str) -> tuple[str, int | None] | None:
    """``(target name, writer pid)`` of a name :func:`temp_name` made (pid None for the older form
    ``.<name>.<12 hex>.tmp``); None for any other name."""
    m = _TEMP_RE.fullmatch(tmp)
    if m is None:
        return None
    return m.group("name"), int(m.group("pid")) if m.group("pid") else None


#: A temp older than this (seconds since its last change) is stale whatever its name says: a pid taken over by a
#: new process, a writer on another machine sharing the board. A write lives for milliseconds.
STALE_AGE_S = 3600.0


def writer_gone(pid: int | None, mtime: float, now: float) -> bool:
    """Whether the writer of a temp entry named with ``pid`` (None: the older form without one), last
    changed at ``mtime``, can never finish it: its process is gone, or the entry is older than
    :data:`STALE_AGE_S`."""
    return (pid is not None and not pid_alive(pid)) or now - mtime > STALE_AGE_S


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (another user's counts as alive): is the writer
    named in a temp file still running? A zombie (dead, its parent has not reaped it yet) is not, where
    ``/proc`` tells (Linux); elsewhere it counts as alive."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:  # not a pid this system can have
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read()
    except OSError:
        return False
    # "pid (comm) S ...": the command may hold spaces and parentheses, the state follows the last ")"
    return stat_line[stat_line.rfind(b")") + 2 : stat_line.rfind(b")") + 3] == b"Z"


def write_all(fd: int, data: bytes, *, sync: bool = True) -> None:
    """Write every byte of ``data`` to ``fd`` (short writes retried), then fsync it unless ``sync`` is
    False. Raises ``OSError``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if sync:
        os.fsync(fd)


def _create_temp(d: SafeDir, name: str) -> tuple[str, int]:
    """A new temp entry for a write of ``name`` in ``d``: ``(its name, an fd open for writing)``."""
    tmp = temp_name(name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return tmp, os.open(tmp, flags, FILE_MODE, dir_fd=d.fd)


def fsync_dir(d: SafeDir) -> None:
    """Make a rename in ``d`` durable; some file systems refuse fsync on a directory (ignored)."""
    with contextlib.suppress(OSError):
        os.fsync(d.fd)


@contextlib.contextmanager
def temp_file(d: SafeDir, name: str, data: bytes) -> Iterator[str]:
    """Yield the name of a new, fsynced dotfile in ``d`` holding ``data`` (readers and the watcher ignore
    dotfiles); it is removed on exit unless the caller renamed it away. Raises ``OSError``."""
    tmp, fd = _create_temp(d, name)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=d.fd)


def replace(d: SafeDir, tmp: str, name: str) -> None:
    """Rename ``tmp`` over ``name`` in ``d``. Raises :class:`UnsafePath` when ``name`` is a directory."""
    try:
        os.replace(tmp, name, src_dir_fd=d.fd, dst_dir_fd=d.fd)
    except OSError as exc:
        if isinstance(exc, IsADirectoryError) or exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise UnsafePath(d.relpath(name), "directory") from None
        raise


def write_replace(d: SafeDir, name: str, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace (or create) ``name`` in ``d`` with ``data`` atomically and durably.

    ``sync_dir=False``: the caller fsyncs ``d`` (:func:`fsync_dir`) before it reports the write, once for
    several writes (the file itself is fsynced here either way).
    Raises :class:`UnsafePath` (``name`` is a directory) or ``OSError`` (disk full...); no temp file is left.
    """
    with temp_file(d, name, data) as tmp:
        replace(d, tmp, name)
    if sync_dir:
        fsync_dir(d)


class Staged:
    """Temp files of new entries of ``d`` written together before their links: :meth:`add` writes each
    without an fsync, :meth:`sync` fsyncs them all, then :func:`write_new` links each one it is given.

    Why: an fsync commits the file system's journal; a batch's files written first and fsynced after,
    the first fsync commits all of them and the others find little left to do (50 files on ext4: 17-23
    ms of CPU against 25-28 one at a time). The order that makes a crash safe stays: a name appears
    only for a file already durable. Use as a context manager: temps not linked are removed on exit.
    A staging that fails (disk full) is dropped, and each write then makes its own temp.
    """

    def __init__(self, d: SafeDir) -> None:
        self._d = d
        self._files: dict[str, tuple[str, object, bytes]] = {}  # name -> (temp name, the caller's key, data)
        self._open: list[int] = []

    def add(self, name: str, data: bytes, key: object) -> None:
        """Write ``data`` for a future entry ``name``; :func:`write_new` takes it for an equal ``key``."""
        if name in self._files:
            return
        tmp, fd = _create_temp(self._d, name)
        self._files[name] = (tmp, key, data)
        self._open.append(fd)
        write_all(fd, data, sync=False)  # :meth:`sync` fsyncs them all

    def sync(self) -> None:
        """Make every temp durable (Raises nothing: on an error the staging is dropped)."""
        try:
            for fd in self._open:
                os.fsync(fd)
        except OSError:
            self.close()
        finally:
            self._close_fds()

    def data(self, name: str, key: object) -> bytes | None:
        """What a durable temp staged for ``name`` with an equal ``key`` holds, else None."""
        staged = self._files.get(name)
        if staged is None or self._open or staged[1] != key:
            return None
        return staged[2]

    def take(self, name: str, key: object) -> str | None:
        """The durable temp staged for ``name`` with an equal ``key`` (handed over once), else None."""
        if self.data(name, key) is None:
            return None
        return self._files.pop(name)[0]

    def _close_fds(self) -> None:
        for fd in self._open:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open = []

    def close(self) -> None:
        """Remove the temps not handed over."""
        self._close_fds()
        for tmp, _, _ in self._files.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self._d.fd)
        self._files = {}

    def __enter__(self) -> Staged:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def _staged_temp(d: SafeDir, tmp: str) -> Iterator[str]:
    try:
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=d.fd)


def write_new(
    d: SafeDir,
    name: str,
    data: bytes,
    *,
    sync_dir: bool = True,
    echo: bool = True,
    staged: tuple[Staged, object] | None = None,
) -> bool:
    """Create ``name`` in ``d`` with ``data`` unless it exists; True when this call created it.

    link(2) never replaces, so exactly one of several concurrent creators wins. ``sync_dir``: as for
    :func:`write_replace`. ``echo=False``: the caller hands the new file to the index itself, so the
    watcher may drop the link's one event (:func:`own_link`). ``staged``: ``(staging, key)``: the temp
    :meth:`Staged.add` wrote for ``name`` with that key, when there is one, holds ``data`` already.
    Raises ``OSError``.
    """
    tmp = staged[0].take(name, staged[1]) if staged is not None else None
    with _staged_temp(d, tmp) if tmp is not None else temp_file(d, name, data) as tmp:
        if not echo:
            _linking.add(name)
        try:
            os.link(tmp, name, src_dir_fd=d.fd, dst_dir_fd=d.fd, follow_symlinks=False)
        except FileExistsError:
            _linking.discard(name)
            return False
        except BaseException:
            _linking.discard(name)
            raise
    if sync_dir:
        fsync_dir(d)
    return True


class _Linking:
    """Names this process is linking into a board folder without an echo (``write_new(echo=False)``),
    each until the watcher sees its creation or :data:`ECHO_WAIT_S` passed; at most :data:`ECHO_NAMES`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, float] = {}  # name -> monotonic time it was added

    def add(self, name: str) -> None:
        with self._lock:
            self._names[name] = time.monotonic()
            if len(self._names) > ECHO_NAMES:
                del self._names[next(iter(self._names))]

    def discard(self, name: str) -> None:
        with self._lock:
            self._names.pop(name, None)

    def take(self, name: str) -> bool:
        with self._lock:
            added = self._names.pop(name, None)
        return added is not None and time.monotonic() - added < ECHO_WAIT_S


#: How long a link without an echo waits for the watcher, and how many may wait (a watcher that is
#: stopped or restarting sees none: the oldest names go).
ECHO_WAIT_S = 10.0
ECHO_NAMES = 4096
_linking = _Linking()


def own_link(name: str) -> bool:
    """Whether the creation of an entry ``name`` the watcher just saw is a link this process made with
    ``write_new(echo=False)`` (each name answers True once). Only a creation: any later change of that
    entry (a write, a rename over it, a delete) is an event of another kind, never dropped."""
    return _linking.take(name)
