"""Starting ``memoryd serve`` from a shim: detached, with its own interpreter, at most one at a time.

Imported only when no daemon answers, so ``subprocess`` stays off the shim's fast path.

Exactly-one-daemon is the daemon's job (it holds a lock and a loser exits). The shims add a cheap
courtesy on top: a non-blocking ``flock`` on ``<socket>.spawn`` so that five shims starting together
spawn one daemon instead of five; the others just keep connecting.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from memoryd_shim import rendezvous

#: A spawn log bigger than this is moved to ``<log>.1`` before the next spawn appends to it.
MAX_LOG_BYTES = 8 * 1024 * 1024
#: Environment variables holding paths; made absolute because the daemon runs with cwd ``/``.
PATH_VARIABLES = ("MEMORYD_HOME", "MEMORYD_BOARD", "MEMORYD_INDEX", "MEMORYD_MODELS", "MEMORYD_SOCKET")


class SpawnLock:
    """A non-blocking exclusive ``flock`` on ``<socket>.spawn``; released by :meth:`release` or at exit."""

    def __init__(self, socket_path: str):
        self.path = socket_path + ".spawn"
        self._fd: int | None = None

    def acquire(self) -> bool:
        """``True`` when this process may spawn now; ``False`` when another shim holds the lock.

        An unusable lock file (read-only dir, …) returns ``True``: the daemon's own lock still
        guarantees one instance, the shims merely lose the courtesy.
        """
        if self._fd is not None:
            return True
        try:
            os.makedirs(os.path.dirname(self.path) or ".", mode=0o700, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def daemon_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default ``os.environ``) with the memoryd path variables made absolute."""
    out = dict(os.environ if env is None else env)
    for name in PATH_VARIABLES:
        if out.get(name):
            out[name] = os.path.abspath(os.path.expanduser(out[name]))
    return out


def _open_log(path: str) -> int:
    """Open the spawn log for appending (rotating once past :data:`MAX_LOG_BYTES`); ``/dev/null`` on error."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            if os.stat(path).st_size > MAX_LOG_BYTES:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


def start_daemon(socket_arg: str | None, log_path: str) -> subprocess.Popen:
    """Start ``<sys.executable> -m memoryd serve [--socket socket_arg]`` detached; returns the child.

    Detached means its own session (agents kill the shim's whole process group), cwd ``/``, stdin and
    stdout on ``/dev/null`` and stderr appended to ``log_path``. The child is not waited for; the caller
    polls it to reap it. Raises ``OSError`` when the interpreter cannot be executed.
    """
    python = sys.executable
    if not python or not os.path.isabs(python):
        raise OSError(f"cannot start the daemon: the shim's interpreter path is unknown ({python!r})")
    argv = rendezvous.serve_argv(python, socket_arg)
    log_fd = _open_log(log_path)
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_fd,
            cwd="/",
            env=daemon_env(),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log_fd)
