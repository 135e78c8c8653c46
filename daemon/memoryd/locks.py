"""Advisory ``flock`` locks and the "is a daemon answering there?" probe, shared by the daemon's single-instance
rule (:mod:`memoryd.serve.lock`), the index's one-writer rule (:mod:`memoryd.index.lock`) and the CLI.

``flock`` locks belong to the open file description, so they vanish when the process dies, even on
``kill -9``: a stale lock file never blocks a new owner. A lock file stays after its owner is done, with
one exception: a daemon refused at start-up deletes the socket lock it took, so a refusal leaves nothing
behind (:meth:`FileLock.release` ``remove=True``). Deleting is safe only because every taker checks, once
its ``flock`` succeeded, that the file it locked is still the one at the path, and starts over if not: else
a process that opened the file before the deletion would lock the deleted inode while a newcomer locks a
new file, and both would own the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from pathlib import Path

#: How often :meth:`FileLock.try_acquire` starts over on a lock file deleted by its holder meanwhile.
_REOPEN_MAX = 20


class FileLock:
    """An exclusive, non-blocking ``flock`` on ``path`` (a regular file created 0600, or a directory).

    ``note`` is written into a regular lock file once held (pid and what it guards) so that the next
    daemon can name the holder in its refusal. Release by :meth:`release` or process exit.
    """

    def __init__(self, path: Path, *, directory: bool = False) -> None:
        self.path = path
        self.directory = directory
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self, note: str | None = None) -> bool:
        """Take the lock if free; ``False`` when another process holds it. Raises ``OSError`` otherwise."""
        if self._fd is not None:
            return True
        for _ in range(_REOPEN_MAX):
            if self.directory:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            else:
                # O_NOFOLLOW: a planted symlink must not make us create or truncate a file elsewhere.
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return False
                raise
            if self.directory or _same_file(fd, self.path):
                break
            os.close(fd)  # its holder deleted the file as we waited (module docstring): lock the new one
        else:
            return False  # deleted under us again and again: treated as held, the caller waits or refuses
        self._fd = fd
        if note is not None and not self.directory:
            os.ftruncate(fd, 0)
            os.pwrite(fd, note.encode(), 0)
        return True

    def holder_note(self) -> str:
        """What the current holder wrote into the lock file ("" when unreadable or a directory lock)."""
        if self.directory:
            return ""
        try:
            return self.path.read_text(errors="replace").strip()[:200]
        except OSError:
            return ""

    def release(self, *, remove: bool = False) -> None:
        """Drop the lock (idempotent). The file stays unless ``remove`` (a regular lock file only, and only
        while it is still the file we locked): it is deleted before the lock is dropped, see the module
        docstring for why that is safe."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            if remove and not self.directory and _same_file(fd, self.path):
                with contextlib.suppress(OSError):  # cleanup only: never hide why we are releasing
                    self.path.unlink()
            os.close(fd)  # closing the last descriptor releases the flock


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not deleted, not replaced)."""
    try:
        at_path = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def socket_answers(path: Path, timeout: float = 0.5) -> bool:
    """``True`` when something accepts connections on the Unix socket ``path`` (a live daemon)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(os.fsencode(path))
    except OSError:
        return False
    finally:
        sock.close()
    return True
