"""Advisory ``flock`` locks and the "is a daemon answering there?" probe, shared by the daemon's single-instance
rule (:mod:`memoryd.serve.lock`), the index's one-writer rule (:mod:`memoryd.index.lock`) and the CLI.

``flock`` locks belong to the open file description, so they vanish when the process dies, even on
``kill -9``: a stale lock file never blocks a new owner. Lock files are never deleted (deleting a lock
file while another process waits on it would let two owners each hold a lock on a different inode).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path


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

    def release(self) -> None:
        """Drop the lock (idempotent). The file stays: see the module docstring."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor releases the flock


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
