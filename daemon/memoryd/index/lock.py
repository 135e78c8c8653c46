"""One writer per index, and one board per index: the two files an index folder carries about itself.

* ``<index>/writer.lock``: an exclusive ``flock`` (:class:`memoryd.locks.FileLock`) held by the one process
  that writes the index, for as long as it may write; its text names the holder
  (``{"pid", "command", "board", "socket"}``; ``socket`` only for a daemon), so a refusal can say who.
* ``<index>/owner.json``: ``{"board": "<absolute path>"}``, the board (or corpus file) the index is
  derived from, written by the first writer of a new folder and kept for the folder's life.

:meth:`IndexLock.acquire` is the only way to become the writer. It refuses

* while another process holds the lock (:class:`IndexInUse`, an :class:`~memoryd.errors.AlreadyRunning`:
  exit 4 for ``memoryd serve``): at once when the holder is a daemon answering on its socket, else after
  waiting up to ``wait_s`` for a holder that is starting, stopping or a short command;
* when ``owner.json`` names another board (:class:`IndexOfAnotherBoard`, exit 1): syncing a second board
  into an index deletes every row of the first, which then re-embeds everything at its next start. The
  index is a cache, so the fix is cheap and the message says it: give the board its own index, or delete
  the folder.

An index folder written before these files existed has no ``owner.json``: its first writer adopts it.
``writer.lock`` is never deleted (see :mod:`memoryd.locks`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd import locks
from memoryd.errors import AlreadyRunning, StartupError

LOCK_FILE = "writer.lock"
OWNER_FILE = "owner.json"
#: Files of the index folder that are about the folder itself, not derived from the board.
OWN_FILES = (LOCK_FILE, OWNER_FILE)
#: How long a command (search, eval, forget) waits for a holder that is not a serving daemon.
DEFAULT_WAIT_S = 10.0
_POLL_S = 0.05


class IndexInUse(AlreadyRunning):
    """Another process writes this index; ``holder`` is what it wrote into the lock (may be empty)."""

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


class IndexOfAnotherBoard(StartupError):
    """The index was built from another board (``owner``); writing this one into it is refused."""

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message)
        self.owner = owner


def read_holder(index: Path) -> dict[str, Any]:
    """What the current (or last) writer wrote into ``<index>/writer.lock``; ``{}`` when unreadable."""
    try:
        value = json.loads((index / LOCK_FILE).read_text(errors="replace") or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read_owner(index: Path) -> str | None:
    """The board named by ``<index>/owner.json``, or ``None`` (absent, unreadable, not ours)."""
    try:
        value = json.loads((index / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    board = value.get("board") if isinstance(value, dict) else None
    return board if isinstance(board, str) and board else None


def describe(holder: dict[str, Any]) -> str:
    """``memoryd serve (pid 12) serving board /b on socket /s`` from a holder note (``... with the index
    /i`` when the note names its index, as the board's does)."""
    command = holder.get("command") or "another memoryd process"
    pid = f" (pid {holder['pid']})" if isinstance(holder.get("pid"), int) else ""
    board = holder.get("board")
    if holder.get("socket"):
        what = f" serving board {board} on socket {holder['socket']}" if board else f" on {holder['socket']}"
    else:
        what = f" for board {board}" if board else ""
    index = f" with the index {holder['index']}" if holder.get("index") else ""
    return f"{command}{pid}{what}{index}"


def _same_board(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class IndexLock:
    """The writer lock of the index folder ``index``, for a process writing ``board`` into it.

    ``command`` names the writer in refusals (``"memoryd serve"``, ``"memoryd search"``...); ``socket`` is
    a daemon's socket (a holder answering there is serving, so a newcomer is refused at once, and a
    search can be sent to it). Release with :meth:`release`, a ``with`` block, or process exit.
    """

    def __init__(self, index: Path, board: Path, *, command: str, socket: Path | None = None) -> None:
        self.index = Path(index)
        self.board = Path(board)
        self.command = command
        self.socket = socket
        self._file = locks.FileLock(self.index / LOCK_FILE)

    @property
    def held(self) -> bool:
        return self._file.held

    def note(self) -> str:
        out: dict[str, Any] = {"pid": os.getpid(), "command": self.command, "board": str(self.board)}
        if self.socket is not None:
            out["socket"] = str(self.socket)
        return json.dumps(out)

    def acquire(self, wait_s: float = DEFAULT_WAIT_S, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Become the index's one writer (idempotent). Creates the folder (0700) when missing.

        Raises :class:`IndexInUse`, :class:`IndexOfAnotherBoard`, or :class:`StartupError` when the
        folder or its lock file cannot be made.
        """
        if self.held:
            return
        try:
            self.index.mkdir(parents=True, exist_ok=True)
            os.chmod(self.index, 0o700)
        except OSError as exc:
            raise StartupError(f"cannot create the index folder {self.index}: {exc.strerror or exc}") from exc
        deadline = clock() + wait_s
        while True:
            try:
                if self._file.try_acquire(self.note()):
                    break
            except OSError as exc:
                raise StartupError(
                    f"cannot open the index lock {self._file.path}: {exc.strerror or exc}"
                ) from exc
            holder = read_holder(self.index)
            serving = bool(holder.get("socket")) and locks.socket_answers(Path(holder["socket"]))
            if serving or clock() >= deadline:
                raise IndexInUse(self._in_use_message(holder, serving, wait_s), holder)
            time.sleep(_POLL_S)
        try:
            self._check_owner()
        except BaseException:
            self.release()
            raise

    def _in_use_message(self, holder: dict[str, Any], serving: bool, wait_s: float) -> str:
        who = describe(holder)
        if holder.get("socket"):
            state = "" if serving else f" (not answering after {wait_s:g} s: starting or stopping)"
            fix = (
                "each board gets its own index when --index and MEMORYD_INDEX are unset; or stop that daemon"
            )
            return f"the index {self.index} is owned by {who}{state}; it has one writer. Fix: {fix}"
        return (
            f"the index {self.index} is in use by {who} (still after {wait_s:g} s); it has one writer. "
            "Try again when it has finished"
        )

    def _check_owner(self) -> None:
        owner = read_owner(self.index)
        if owner is None:
            self._write_owner()
        elif not _same_board(owner, str(self.board)):
            raise IndexOfAnotherBoard(
                f"the index {self.index} belongs to the board {owner}, not {self.board}; indexing this board "
                f"into it would delete every row of the other. Fix: give {self.board} its own index (leave "
                "--index and MEMORYD_INDEX unset: every board then gets one of its own, or pass another "
                f"--index), or delete {self.index} (it is a cache of its board and is rebuilt)",
                owner,
            )

    def _write_owner(self) -> None:
        tmp = self.index / f".{OWNER_FILE}.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps({"board": str(self.board)}) + "\n")
            os.replace(tmp, self.index / OWNER_FILE)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StartupError(f"cannot write {self.index / OWNER_FILE}: {exc.strerror or exc}") from exc

    def release(self) -> None:
        """Stop being the writer (idempotent); ``owner.json`` and the lock file stay."""
        self._file.release()

    def __enter__(self) -> IndexLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
