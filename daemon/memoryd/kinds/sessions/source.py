"""The ``sessions/`` record source (:mod:`memoryd.core.sources`): interactions and summaries as index records.

Origins are the two files of a session, ``sessions/<id>.jsonl`` (one ``interaction`` record per readable
line) and ``sessions/<id>.summary.json`` (one ``summary`` record); any other entry of ``sessions/`` (temp
and editor files aside) is its own origin, skipped with :data:`~memoryd.kinds.sessions.files.MISNAMED`
while it exists, as memories and briefs report theirs. Besides the records,
:class:`SessionSource` keeps a small view the tools read without touching the folder: per session the
number of readable interactions and the last interaction's timestamp, and every summary. Interactions
themselves are read from disk when a tool asks (they can be large). The view is refreshed only by the
indexer, so after a write has been submitted and awaited it includes that write.

Every change of a log re-reads the whole file (an append is a change like any other), but a turn's record
is derived (redaction, keyword terms) only once: :class:`TurnRecords` keeps the records of the logs loaded
last, by turn. Deriving every turn again took seconds per ``add_memory`` on a log of a few MiB, growing with
the session, and every other agent's search waited for it behind the indexer's read barrier.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from memoryd.board.gate import Skipped, UnsafePath
from memoryd.index.records import Record, SourceBatch, records_by_id
from memoryd.kinds.sessions.files import (
    LOG_SUFFIX,
    MISNAMED,
    SESSIONS_DIR,
    SUMMARY_SUFFIX,
    FormatError,
    Interaction,
    Summary,
    load_summary,
    misnamed,
    read_log,
    scan_sessions,
    session_of_path,
)
from memoryd.kinds.sessions.records import KINDS, interaction_record, summary_record
from memoryd.logs import get_logger

log = get_logger("memoryd.sessions")


@dataclass(frozen=True)
class SessionInfo:
    """What the view knows of one session's log: readable interactions, skipped lines, last timestamp."""

    session_id: str
    interactions: int
    skipped_lines: int
    first_at: str
    last_at: str


def log_origin(session_id: str) -> str:
    return f"{SESSIONS_DIR}/{session_id}{LOG_SUFFIX}"


def summary_origin(session_id: str) -> str:
    return f"{SESSIONS_DIR}/{session_id}{SUMMARY_SUFFIX}"


#: Characters of turns whose records :class:`TurnRecords` keeps (about as many bytes of keyword terms).
TURN_CACHE_CHARS = 8 * 2**20


class TurnRecords:
    """The records of the turns of the session logs loaded last, per session, least recently loaded dropped
    first past :data:`TURN_CACHE_CHARS` (a log longer than that alone is not kept). A turn is known by its
    id and a digest of its fields, so a line edited by hand is derived again. Any thread."""

    def __init__(self, max_chars: int = TURN_CACHE_CHARS) -> None:
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, tuple[dict[tuple[str, bytes], Record], int]] = OrderedDict()
        self._chars = 0

    @staticmethod
    def _key(item: Interaction) -> tuple[str, bytes]:
        digest = hashlib.blake2b(digest_size=16)
        for text in (item.session_id, item.timestamp, item.prompt, item.thought, item.response, item.type):
            digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
        return item.id, digest.digest()

    def records(self, session_id: str, items: list[Interaction]) -> list[Record]:
        """The record of each of ``items`` (one session's turns, file order), derived only when new."""
        with self._lock:
            known, _ = self._sessions.get(session_id, ({}, 0))
        keys = [self._key(item) for item in items]
        out: dict[tuple[str, bytes], Record] = {}
        chars = 0
        for key, item in zip(keys, items, strict=True):
            if key not in out:
                out[key] = known.get(key) or interaction_record(item)
                chars += len(item.prompt) + len(item.thought) + len(item.response)
        self._keep(session_id, out, chars)
        return [out[key] for key in keys]

    def forget(self, session_id: str) -> None:
        """Drop what is kept of a session (its log is gone)."""
        self._keep(session_id, {}, 0)

    def _keep(self, session_id: str, records: dict[tuple[str, bytes], Record], chars: int) -> None:
        with self._lock:
            _, before = self._sessions.pop(session_id, ({}, 0))
            self._chars -= before
            if not records or chars > self.max_chars:
                return
            self._sessions[session_id] = (records, chars)
            self._chars += chars
            while self._chars > self.max_chars:
                _, (_, dropped) = self._sessions.popitem(last=False)
                self._chars -= dropped


#: The view's three maps: session -> SessionInfo, session -> Summary, origin -> Skipped.
_View = tuple[dict[str, SessionInfo], dict[str, Summary], dict[str, Skipped]]


class SessionSource:
    """Record source for ``sessions/`` plus the view described in the module docstring."""

    folders = (SESSIONS_DIR,)
    kinds = KINDS

    def __init__(self, board: Path, turn_cache_chars: int = TURN_CACHE_CHARS) -> None:
        self.board = Path(board)
        self._lock = threading.Lock()
        self._logs: dict[str, SessionInfo] = {}
        self._summaries: dict[str, Summary] = {}
        self._skipped: dict[str, Skipped] = {}
        self._turns = TurnRecords(turn_cache_chars)

    # -- RecordSource ---------------------------------------------------------------------------------
    def load_all(self) -> SourceBatch:
        batch = SourceBatch(complete=True)
        # built aside and swapped in at once: readers never see a view emptied for the reload
        view: _View = ({}, {}, {})
        try:
            ids, other = scan_sessions(self.board)
        except (UnsafePath, OSError) as exc:
            # sessions/ itself refused (a file, a symlink): skipped, as the other kinds skip their folder
            ids, other = [], []
            where, why = (exc.path, exc.reason) if isinstance(exc, UnsafePath) else (SESSIONS_DIR, str(exc))
            self._skip(batch, where, why)
            view[2][where] = Skipped(where, why)
        for session_id in ids:
            self._load(session_id, batch, view)
        for path in other:
            self._misnamed(path, batch, view)
        with self._lock:
            self._logs, self._summaries, self._skipped = view
        return batch

    def records_for(self, paths: Collection[str]) -> SourceBatch:
        batch = records_by_id(self, paths, SESSIONS_DIR, session_of_path, self._load)
        if not batch.complete:  # a full load has reported every misnamed entry already
            for path in sorted(filter(misnamed, paths)):
                self._misnamed(path, batch)
        return batch

    def _misnamed(self, path: str, batch: SourceBatch, view: _View | None = None) -> None:
        """An entry of ``sessions/`` named as no session's file: skipped while it exists (its origin is the
        entry, so removing it clears the skip)."""
        there = os.path.lexists(self.board / path)
        if there:
            self._skip(batch, path, MISNAMED)
        batch.origins.setdefault(path, ())
        with self._lock:
            skipped = (view or (self._logs, self._summaries, self._skipped))[2]
            if there:
                skipped[path] = Skipped(path, MISNAMED)
            else:
                skipped.pop(path, None)

    def _load(self, session_id: str, batch: SourceBatch, view: _View | None = None) -> None:
        """Re-read both files of one session into ``batch`` and ``view`` (default: the live view)."""
        origin = log_origin(session_id)
        info = None
        try:
            slog = read_log(self.board, session_id)
        except UnsafePath as exc:
            slog = None
            self._skip(batch, origin, exc.reason)
        if slog is not None:
            items = slog.interactions
            batch.add(origin, self._turns.records(session_id, items))
            stamps = sorted(i.timestamp for i in items)
            info = SessionInfo(
                session_id,
                len(items),
                len(slog.skipped),
                stamps[0] if stamps else "",
                stamps[-1] if stamps else "",
            )
            if slog.skipped:
                where = ", ".join(f"line {n}: {why}" for n, why in slog.skipped[:5])
                batch.skipped.append(Skipped(origin, f"{len(slog.skipped)} line(s) skipped ({where})"))
        else:
            self._turns.forget(session_id)
            batch.origins.setdefault(origin, ())
        s_origin = summary_origin(session_id)
        summary = None
        try:
            summary = load_summary(self.board, session_id)
        except (UnsafePath, FormatError) as exc:
            self._skip(batch, s_origin, getattr(exc, "reason", str(exc)))
        batch.add(s_origin, [summary_record(summary)] if summary is not None else [])
        with self._lock:
            logs, summaries, skipped = view or (self._logs, self._summaries, self._skipped)
            if info is None:
                logs.pop(session_id, None)
            else:
                logs[session_id] = info
            if summary is None:
                summaries.pop(session_id, None)
            else:
                summaries[session_id] = summary
            for o in (origin, s_origin):
                if not any(s.path == o for s in batch.skipped):
                    skipped.pop(o, None)
            for s in batch.skipped:
                if s.path in (origin, s_origin):
                    skipped[s.path] = s

    def _skip(self, batch: SourceBatch, origin: str, reason: str) -> None:
        """``origin`` is skipped for ``reason``; warned once while it stays so (a full reload of the folder,
        a moved folder or a rescan, reports it again without another warning)."""
        with self._lock:
            known = self._skipped.get(origin)
        if known is None or known.reason != reason:
            log.warning("board.file_skipped", path=origin, reason=reason)
        batch.skipped.append(Skipped(origin, reason))
        batch.origins.setdefault(origin, ())

    # -- the view (any thread) -------------------------------------------------------------------------
    def sessions(self) -> list[SessionInfo]:
        """Every session with a readable log, newest activity first."""
        with self._lock:
            infos = list(self._logs.values())
        return sorted(infos, key=lambda i: (i.last_at, i.session_id), reverse=True)

    def summaries(self) -> list[Summary]:
        """Every summary, newest first (by its timestamp)."""
        with self._lock:
            items = list(self._summaries.values())
        return sorted(items, key=lambda s: (s.timestamp, s.session_id), reverse=True)

    def summary(self, session_id: str) -> Summary | None:
        with self._lock:
            return self._summaries.get(session_id)

    def skipped(self) -> list[Skipped]:
        with self._lock:
            return list(self._skipped.values())

    def stale(self) -> list[SessionInfo]:
        """Sessions whose summary is missing or older than their log (another interaction count, or an
        interaction newer than the summary's ``coveredUntil`` when it has one), oldest activity first."""
        out = []
        with self._lock:
            for info in self._logs.values():
                s = self._summaries.get(info.session_id)
                if info.interactions == 0:
                    continue
                behind = bool(s and s.covered_until) and s.covered_until < info.last_at
                if s is None or s.memory_count != info.interactions or behind:
                    out.append(info)
        return sorted(out, key=lambda i: (i.last_at, i.session_id))


def source(board: Path) -> SessionSource:
    """Entry point for :data:`memoryd.core.sources.SOURCES`."""
    return SessionSource(board)
