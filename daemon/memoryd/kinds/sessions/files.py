"""Session files on the board: agent interactions and session summaries, Memory Core's shapes.

Layout (board-relative)::

    sessions/<session-id>.jsonl          one interaction per line (append-only)
    sessions/<session-id>.summary.json   the session's summary (replaced atomically)

Session ids match :data:`SESSION_ID_PATTERN` (ASCII letters, digits, ``_`` and ``-``, 1-128 characters,
starting with a letter or digit; a UUID fits) and are checked before any file access, so an id can never
climb out of ``sessions/`` or name a hidden or temp file. Interaction ids match :data:`ITEM_ID_PATTERN`.

Interaction line (Neo.mjs Memory Core ``Memory`` schema)::

    {"id","sessionId","timestamp","prompt","thought","response","type"}

Summary file (Memory Core ``Summary`` schema; ``method`` says who wrote it: ``"sampling"`` - the
client's model through MCP ``sampling/createMessage`` - or ``"extractive"``; ``coveredUntil`` is the
timestamp of the last interaction it covers)::

    {"id","sessionId","timestamp","title","summary","category","memoryCount","quality","productivity",
     "impact","complexity","technologies":[...],"method","coveredUntil"}

Appends: the full line (``\\n`` included) goes out in ONE ``os.write`` on a descriptor opened with
``O_APPEND``, so concurrent appenders never interleave inside a line (POSIX: each append write is
positioned at the end atomically; Linux and macOS hold the file lock for the whole write of a regular
file). If a crash left a torn last line (no ``\\n``), the next append first ends it, so the new line is
never glued to the torn one. fsync policy: every append is ``fsync``-ed before :func:`append_interaction`
returns (Memory Core's "save, then respond": an interaction reported saved survives a power loss); the
folder is ``fsync``-ed when the file was created.

Reads go through :mod:`memoryd.board.gate` (no symlinks, FIFOs or hard links; size-bounded). A torn last
line or a broken line (bad UTF-8, bad JSON, missing field, wrong ``sessionId``, duplicate id) is skipped
with a warning naming the line number; every other line still loads.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.board import atomic
from memoryd.board.gate import SafeDir, UnsafePath, decode_utf8, is_ignored_name, open_folder
from memoryd.errors import ToolFailed
from memoryd.kinds.sessions.format import (  # re-exported: callers import them from here
    CATEGORIES,
    INTERACTION_TYPE,
    ITEM_ID_PATTERN,
    LOG_SUFFIX,
    SCORES,
    SESSION_ID_PATTERN,
    SESSIONS_DIR,
    SUMMARY_SUFFIX,
    FormatError,
    Interaction,
    InvalidSessionId,
    Summary,
    check_session_id,
    encode_line,
    is_item_id,
    is_session_id,
    new_session_id,
    now_iso,
    parse_interaction,
    parse_summary,
)
from memoryd.logs import get_logger

log = get_logger("memoryd.kinds.sessions.files")

#: A session file may grow past the gate's default bound; past this it is refused (logged), never read.
MAX_LOG_BYTES = 64 * 2**20
MAX_SUMMARY_BYTES = 2**20
_append_lock = threading.Lock()  # the torn-line check and the write of one append stay together


class SessionFull(ToolFailed):
    """An append would take a session's log past :data:`MAX_LOG_BYTES`: the log would then be refused
    whole (every turn of the session gone from search and from ``get_session_memories``)."""


__all__ = [
    "SessionFull",
    "CATEGORIES",
    "INTERACTION_TYPE",
    "ITEM_ID_PATTERN",
    "SCORES",
    "SESSION_ID_PATTERN",
    "FormatError",
    "Interaction",
    "InvalidSessionId",
    "SessionLog",
    "Summary",
    "append_interaction",
    "check_session_id",
    "encode_line",
    "is_item_id",
    "is_session_id",
    "list_sessions",
    "misnamed",
    "scan_sessions",
    "MISNAMED",
    "load_summary",
    "new_session_id",
    "now_iso",
    "parse_interaction",
    "parse_log",
    "parse_summary",
    "read_log",
    "read_summary",
    "remove_session",
    "session_of_path",
    "write_atomic",
    "fitting",
    "write_log",
    "write_summary",
]


# --- reading ----------------------------------------------------------------------------------------


@dataclass
class SessionLog:
    """The readable interactions of one session file, in file order, and the lines that were skipped."""

    session_id: str
    interactions: list[Interaction] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (1-based line number, reason)


def parse_log(data: bytes, session_id: str, where: str = "") -> SessionLog:
    """Parse the bytes of a session file; never raises for content (see the module docstring)."""
    out = SessionLog(session_id)
    seen: set[str] = set()
    lines = data.split(b"\n")
    torn = lines[-1] != b""  # a last line without its "\n": a crash mid-append, or a hand edit
    if not torn:
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        last = torn and number == len(lines)
        try:
            item = parse_interaction(json.loads(raw.decode("utf-8")), session_id)
            if item.id in seen:
                raise FormatError(f"duplicate id {item.id!r}")
        except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, FormatError, a number too long
            reason = ("torn last line: " if last else "") + _reason(exc)
            out.skipped.append((number, reason))
            log.warning("sessions.line_skipped", path=where, line=number, reason=reason)
            continue
        seen.add(item.id)
        out.interactions.append(item)
    return out


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {exc.start}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    if not isinstance(exc, FormatError):  # json's own ValueError: an integer past Python's digit limit
        return "not JSON Python can read (a number too long)"
    return str(exc)


def _open_sessions(board_root: Path, create: bool = False) -> SafeDir | None:
    """``sessions/`` through the gate; None when absent (and not ``create``). BoardUnreadable for the root."""
    return open_folder(board_root, SESSIONS_DIR, create=create)


def _read_file(board_root: Path, session_id: str, suffix: str, max_bytes: int) -> tuple[bytes, str] | None:
    """The bytes of ``sessions/<session_id><suffix>`` and its board-relative path; None when absent."""
    check_session_id(session_id)
    d = _open_sessions(board_root)
    if d is None:
        return None
    with d:
        name = session_id + suffix
        try:
            return d.read_bytes(name, max_bytes), d.relpath(name)
        except FileNotFoundError:
            return None


def read_log(board_root: Path, session_id: str) -> SessionLog | None:
    """The interactions of ``session_id``; None when it has no file. Raises InvalidSessionId first,
    BoardUnreadable for the root, UnsafePath when the file or ``sessions/`` is refused by the gate."""
    found = _read_file(board_root, session_id, LOG_SUFFIX, MAX_LOG_BYTES)
    return None if found is None else parse_log(found[0], session_id, found[1])


def load_summary(board_root: Path, session_id: str) -> Summary | None:
    """The summary of ``session_id``, None when absent. Raises :class:`FormatError` (broken content,
    the message says why), UnsafePath (refused by the gate), InvalidSessionId, BoardUnreadable."""
    found = _read_file(board_root, session_id, SUMMARY_SUFFIX, MAX_SUMMARY_BYTES)
    if found is None:
        return None
    text = decode_utf8(*found)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # bad JSON, or a number too long for Python
        raise FormatError(_reason(exc)) from None
    return parse_summary(data, session_id)


def read_summary(board_root: Path, session_id: str) -> Summary | None:
    """:func:`load_summary`, but a broken or refused file is logged and read as None."""
    try:
        return load_summary(board_root, session_id)
    except (UnsafePath, FormatError) as exc:
        log.warning("sessions.summary_skipped", session=session_id, reason=str(exc))
        return None


#: Why an entry of ``sessions/`` that is no session's file is skipped.
MISNAMED = f"name is not <session-id>{LOG_SUFFIX} or <session-id>{SUMMARY_SUFFIX}"


def scan_sessions(board_root: Path) -> tuple[list[str], list[str]]:
    """``(ids, misnamed)``: the session ids that have a log or a summary file, sorted, and the board paths
    of the other entries of ``sessions/`` (files or folders; temp and editor files are ignored:
    :func:`memoryd.board.gate.is_ignored_name`), sorted. BoardUnreadable for the root."""
    d = _open_sessions(board_root)
    if d is None:
        return [], []
    ids: set[str] = set()
    other: list[str] = []
    with d:
        for name in d.names():
            found = _session_of_name(name)
            if found is not None:
                ids.add(found)
            elif not is_ignored_name(name):
                other.append(f"{SESSIONS_DIR}/{name}")
    return sorted(ids), sorted(other)


def list_sessions(board_root: Path) -> list[str]:
    """Session ids that have a log or a summary file, sorted (:func:`scan_sessions`)."""
    return scan_sessions(board_root)[0]


def session_of_path(rel: str) -> str | None:
    """The session id a board-relative path like ``sessions/<id>.jsonl`` belongs to, or None."""
    parts = rel.split("/")
    if len(parts) != 2 or parts[0] != SESSIONS_DIR:
        return None
    return _session_of_name(parts[1])


def misnamed(rel: str) -> bool:
    """True for a board-relative ``sessions/<name>`` that is no session's file and no temp or editor file:
    an entry the folder holds but no session (reported as skipped while it exists)."""
    parts = rel.split("/")
    return (
        len(parts) == 2
        and parts[0] == SESSIONS_DIR
        and not is_ignored_name(parts[1])
        and _session_of_name(parts[1]) is None
    )


def _session_of_name(name: str) -> str | None:
    for suffix in (SUMMARY_SUFFIX, LOG_SUFFIX):
        if name.endswith(suffix) and is_session_id(name[: -len(suffix)]):
            return name[: -len(suffix)]
    return None


# --- writing ----------------------------------------------------------------------------------------


def append_interaction(board_root: Path, item: Interaction) -> Path:
    """Append ``item`` as one line to ``sessions/<sessionId>.jsonl`` (created 0600 when absent) and fsync.

    Raises InvalidSessionId, BoardUnreadable (root), UnsafePath (the log is a symlink, a hard link or
    not a regular file), SessionFull (the log would pass :data:`MAX_LOG_BYTES`; nothing is written),
    OSError for a failed write (nothing partial is reported as saved).
    """
    check_session_id(item.session_id)
    line = encode_line(item.to_json())
    d = _open_sessions(board_root, create=True)
    assert d is not None
    with d:
        name = item.session_id + LOG_SUFFIX
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, atomic.FILE_MODE, dir_fd=d.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise UnsafePath(d.relpath(name), "not a regular file") from None
            raise
        try:
            st = os.fstat(fd)
            if not (st.st_mode & 0o170000 == 0o100000) or st.st_nlink != 1:
                raise UnsafePath(d.relpath(name), "not a regular file with one link")
            with _append_lock:
                if st.st_size > 0 and os.pread(fd, 1, st.st_size - 1) != b"\n":
                    line = b"\n" + line  # end a torn last line first: it stays skipped, ours stays whole
                if st.st_size + len(line) > MAX_LOG_BYTES:
                    raise SessionFull(
                        f"session {item.session_id} is full: this turn would take its log past "
                        f"{MAX_LOG_BYTES // 2**20} MiB, the most memoryd reads; nothing was added. Add further "
                        "turns to a new session (add_memory without sessionId starts one)."
                    )
                written = os.write(fd, line)
                if written != len(line):  # disk full mid-line: the torn tail is skipped on read
                    raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)")
            os.fsync(fd)
        finally:
            os.close(fd)
        if st.st_size == 0:
            with contextlib.suppress(OSError):
                os.fsync(d.fd)
        return Path(board_root) / d.relpath(name)


def write_atomic(d: SafeDir, name: str, data: bytes) -> None:
    """Write ``name`` in directory ``d`` by temp file + fsync + rename (a symlink at ``name`` is replaced,
    never followed): :func:`memoryd.board.atomic.write_replace`."""
    atomic.write_replace(d, name, data)


def write_summary(board_root: Path, summary: Summary) -> Path:
    """Replace ``sessions/<sessionId>.summary.json`` atomically (temp + rename); returns its path."""
    check_session_id(summary.session_id)
    data = (json.dumps(summary.to_json(), ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    d = _open_sessions(board_root, create=True)
    assert d is not None
    with d:
        name = summary.session_id + SUMMARY_SUFFIX
        write_atomic(d, name, data)
        return Path(board_root) / d.relpath(name)


def fitting(have: list[Interaction], new: list[Interaction]) -> int:
    """How many of ``new`` (in order) fit after ``have`` in one log of at most :data:`MAX_LOG_BYTES`."""
    size = sum(len(encode_line(i.to_json())) for i in have)
    for n, item in enumerate(new):
        size += len(encode_line(item.to_json()))
        if size > MAX_LOG_BYTES:
            return n
    return len(new)


def write_log(board_root: Path, session_id: str, items: list[Interaction]) -> Path:
    """Replace a whole session file atomically (imports); every item must belong to ``session_id``.
    Raises SessionFull (nothing written) when the log would pass :data:`MAX_LOG_BYTES` (see :func:`fitting`)."""
    check_session_id(session_id)
    if any(i.session_id != session_id for i in items):
        raise ValueError("every interaction must belong to the session written")
    data = b"".join(encode_line(i.to_json()) for i in items)
    if len(data) > MAX_LOG_BYTES:
        raise SessionFull(
            f"session {session_id}: {len(data)} bytes of turns would pass {MAX_LOG_BYTES // 2**20} MiB, "
            "the most memoryd reads; nothing was written"
        )
    d = _open_sessions(board_root, create=True)
    assert d is not None
    with d:
        name = session_id + LOG_SUFFIX
        write_atomic(d, name, data)
        return Path(board_root) / d.relpath(name)


def remove_session(board_root: Path, session_id: str) -> int:
    """Delete a session's log and summary (replace imports); returns how many files were removed."""
    check_session_id(session_id)
    d = _open_sessions(board_root)
    if d is None:
        return 0
    removed = 0
    with d:
        for name in (session_id + LOG_SUFFIX, session_id + SUMMARY_SUFFIX):
            try:
                os.unlink(name, dir_fd=d.fd)
                removed += 1
            except FileNotFoundError:
                pass
    return removed
