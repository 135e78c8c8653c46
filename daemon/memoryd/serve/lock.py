"""Single instance per socket and per board: advisory ``flock`` locks (watchman ``ProcessLock`` style).

Order of start-up (closes the races between daemons started at once, e.g. five shims each spawning one):

1. lock ``<socket>.lock`` (:attr:`memoryd.paths.Locations.lock_file`), then the board directory itself;
2. only while holding both, prove an old socket stale and replace it (:mod:`memoryd.serve.socketfile`);
3. bind and listen.

A lock that is held by someone else is either a live daemon (its socket answers: we refuse with
:class:`~memoryd.errors.AlreadyRunning`) or one that is starting up or shutting down (its socket does not
answer yet / any more). In the latter case we wait a little: a daemon that is stopping removes its socket
before it releases the lock, so a shim that saw the socket vanish and spawned us must not be refused.

``flock`` locks belong to the open file description, so they vanish when the process dies, even on
``kill -9``: a stale lock file never blocks a new daemon. Lock files are never deleted (deleting a lock
file while another process waits on it would let two daemons each hold a lock on a different inode).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from memoryd.errors import AlreadyRunning, StartupError
from memoryd.locks import FileLock, socket_answers

__all__ = ["DEFAULT_LOCK_WAIT_S", "FileLock", "acquire", "socket_answers"]

#: How long a new daemon waits for a lock whose holder is not serving (starting up or stopping).
DEFAULT_LOCK_WAIT_S = 8.0
_POLL_S = 0.05


def acquire(
    lock: FileLock,
    socket_path: Path,
    *,
    what: str,
    note: str | None = None,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Acquire ``lock`` for the daemon serving ``socket_path``; ``what`` names the guarded thing in messages.

    Raises :class:`AlreadyRunning` when the holder is serving (its socket answers) or still holds the lock
    after ``wait_s`` seconds; :class:`StartupError` when the lock file itself cannot be opened.
    """
    deadline = clock() + wait_s
    while True:
        try:
            if lock.try_acquire(note):
                return
        except OSError as exc:
            raise StartupError(f"cannot open the lock {lock.path}: {exc.strerror or exc}") from exc
        holder = lock.holder_note()
        holder_text = f" ({holder})" if holder else ""
        if socket_answers(socket_path):
            raise AlreadyRunning(
                f"memoryd is already running for {what}{holder_text} and answering on {socket_path}; "
                "this daemon exits and the running one keeps serving"
            )
        if clock() >= deadline:
            raise AlreadyRunning(
                f"another memoryd holds the lock for {what}{holder_text} but does not answer on {socket_path} "
                f"after {wait_s:.0f} s; stop it (or wait for it to finish starting) and try again"
            )
        # The holder is starting up (socket not bound yet) or shutting down (socket already removed).
        time.sleep(_POLL_S)
