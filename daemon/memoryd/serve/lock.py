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
``kill -9``: a stale lock file never blocks a new daemon. The socket's lock file stays while its daemon
runs and after it stops; only a daemon refused at start-up deletes the one it took (a refusal leaves
nothing behind), which is safe because every taker re-checks the file after locking it (:mod:`memoryd.locks`).

The board's lock is the board folder itself, which carries no text; so the daemon holding it writes who it
is into :data:`BOARD_NOTE` in the board's root (:func:`write_board_note`: ``{"pid", "command", "host",
"board", "socket", "index"}``) and removes it before releasing the lock. A daemon refused the board reads
it (:func:`board_holder`) to name the holder, whatever its ``MEMORYD_HOME``, socket or index; a note left
by a killed daemon, or written on another machine (a synced board), is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.board import atomic, gate
from memoryd.errors import AlreadyRunning, StartupError
from memoryd.index.lock import describe, read_holder
from memoryd.locks import FileLock, socket_answers
from memoryd_shim import rendezvous

__all__ = [
    "BOARD_NOTE",
    "DEFAULT_LOCK_WAIT_S",
    "FileLock",
    "acquire",
    "board_holder",
    "read_board_note",
    "remove_board_note",
    "socket_answers",
    "write_board_note",
]

#: The board lock's holder note, a file in the board's root (module docstring).
BOARD_NOTE = ".memoryd-holder.json"
_NOTE_MAX_BYTES = 4096

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
    holder_of: Callable[[], dict] | None = None,
) -> None:
    """Acquire ``lock`` for the daemon serving ``socket_path``; ``what`` names the guarded thing in messages.

    ``holder_of`` (for a lock that carries no note, such as the board's) returns what the likely holder wrote
    about itself (``{"pid", "command", "socket"}``, :func:`memoryd.index.lock.read_holder`): a daemon that
    answers on *another* socket is serving, so it is named at once instead of waited for.

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
            # the socket's own lock: ``what`` names that socket, which the sentence names once
            subject = "" if str(socket_path) in what else f" for {what}"
            raise AlreadyRunning(
                f"memoryd is already running{subject}{holder_text} and answering on {socket_path}; "
                "this daemon exits and the running one keeps serving"
            )
        other = _serving_elsewhere(holder_of, socket_path)
        if other:
            running, its_socket = other
            raise AlreadyRunning(
                f"{running} is running; one board is served by one daemon: point MEMORYD_SOCKET at "
                f"{its_socket}, or stop that daemon (MEMORYD_SOCKET={its_socket} memoryd stop) before "
                f"serving {what} on {socket_path}"
            )
        if clock() >= deadline:
            note = holder_of() if holder_of is not None else {}
            if isinstance(note.get("pid"), int) and atomic.pid_alive(note["pid"]):  # named, not answering
                raise AlreadyRunning(
                    f"{what} is held by {describe({**note, 'board': None})}, which does not answer after "
                    f"{wait_s:.0f} s (starting, stopping or stuck); one board is served by one daemon: wait "
                    f"for it, or stop it (kill {note['pid']}), and try again"
                )
            if holder_of is not None:  # we hold our socket's lock: the holder serves some other socket
                raise AlreadyRunning(
                    f"another memoryd process holds {what} and serves it on a socket other than "
                    f"{socket_path} (still there after {wait_s:.0f} s); one board is served by one daemon: "
                    "find it with `ps -ef | grep 'memoryd serve'`, stop it, and try again"
                )
            raise AlreadyRunning(
                f"another memoryd holds the lock for {what}{holder_text} but does not answer on {socket_path} "
                f"after {wait_s:.0f} s; stop it (or wait for it to finish starting) and try again"
            )
        # The holder is starting up (socket not bound yet) or shutting down (socket already removed).
        time.sleep(_POLL_S)


def _serving_elsewhere(holder_of: Callable[[], dict] | None, socket_path: Path) -> tuple[str, str] | None:
    """``(describe(note), its socket)`` when the holder's ``note = holder_of()`` answers on a socket other
    than ours, else None."""
    note = holder_of() if holder_of is not None else {}
    other = note.get("socket") if isinstance(note, dict) else None
    if not isinstance(other, str) or not other or Path(other) == Path(socket_path):
        return None
    return (describe(note), other) if socket_answers(Path(other)) else None


def board_holder(board: Path, index: Path | None, socket_path: Path) -> dict:
    """Who likely holds ``board``'s lock: ``{"pid", "command", "socket", "board"}`` (plus ``"index"`` and
    ``"host"`` from a board note) or ``{}``.

    The holder's note in the board (:func:`read_board_note`); else, for a holder that wrote none, the
    writer's note in ``index`` (a daemon on the same index), else the daemon answering on this install's
    default socket when it serves ``board`` (the service on the default socket, and another on
    ``--socket`` with its own index)."""
    from memoryd.serve.control import ask_status

    note = read_board_note(board)
    if note:
        return note
    note = read_holder(index) if index is not None else {}
    if isinstance(note.get("socket"), str) and note["socket"] and Path(note["socket"]) != Path(socket_path):
        return note
    default = Path(rendezvous.socket_path_str({k: v for k, v in os.environ.items() if k != "MEMORYD_SOCKET"}))
    if default == Path(socket_path):
        return note
    try:
        status = ask_status(default, timeout=0.3)
    except (OSError, ValueError):
        return note
    if status and _same_path(status.get("board"), board):
        return {
            "pid": status.get("pid"),
            "command": "memoryd serve",
            "socket": str(default),
            "board": str(board),
        }
    return note


def _same_path(a: object, b: Path) -> bool:
    try:
        return isinstance(a, str) and bool(a) and Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def write_board_note(board: Path, *, socket_path: Path | None, index: Path | None) -> None:
    """Say in :data:`BOARD_NOTE` that this process (``memoryd serve``) holds ``board``'s lock, serving it on
    ``socket_path`` with the index ``index``. Call it holding the lock. Replaced atomically, never through a
    symlink planted at its name. Raises ``OSError`` (a read-only board) or ``UnsafePath`` (a folder at its
    name); the caller serves on without it."""
    note: dict[str, Any] = {
        "pid": os.getpid(),
        "command": "memoryd serve",
        "host": socket.gethostname(),
        "board": str(board),
        "socket": str(socket_path) if socket_path is not None else None,
        "index": str(index) if index is not None else None,
    }
    with gate.open_root(board) as root:
        atomic.write_replace(root, BOARD_NOTE, json.dumps(note).encode() + b"\n", sync_dir=False)


def read_board_note(board: Path) -> dict[str, Any]:
    """The note of the process holding ``board``'s lock, or ``{}``: absent, unreadable, not JSON, or not
    about a live process of this machine serving this board (a daemon killed before it could remove its
    note, a board copied or synced from elsewhere). Its strings are cut to 300 characters (the board is
    untrusted input: they end up in a message)."""
    try:
        value = json.loads(gate.safe_read_text(board, Path(BOARD_NOTE), max_bytes=_NOTE_MAX_BYTES))
    except (OSError, ValueError, gate.UnsafePath):
        return {}
    if not isinstance(value, dict):
        return {}
    note = {k: v[:300] for k, v in value.items() if isinstance(v, str) and k != "pid"}
    pid = value.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return {}
    if note.get("host") != socket.gethostname() or not _same_path(note.get("board"), board):
        return {}
    return {**note, "pid": pid} if atomic.pid_alive(pid) else {}


def remove_board_note(board: Path) -> None:
    """Remove :data:`BOARD_NOTE` when it names this process (call it before releasing the board's lock);
    never raises."""
    with contextlib.suppress(OSError, ValueError, gate.UnsafePath):
        value = json.loads(gate.safe_read_text(board, Path(BOARD_NOTE), max_bytes=_NOTE_MAX_BYTES))
        if isinstance(value, dict) and value.get("pid") == os.getpid():
            with gate.open_root(board) as root:
                root.unlink(BOARD_NOTE)
