"""The ``sessions/`` record source (:mod:`memoryd.core.sources`): interactions and summaries as index records.

Origins are the two files of a session, ``sessions/<id>.jsonl`` (one ``interaction`` record per readable
line) and ``sessions/<id>.summary.json`` (one ``summary`` record); any other entry of ``sessions/`` (temp
and editor files aside) is its own origin, skipped with :data:`~memoryd.kinds.sessions.files.MISNAMED`
while it exists, as memories and briefs report theirs. Besides the records,
:class:`SessionSource` keeps a small view the tools read without touching the folder: per session the
number of readable interactions and the last interaction's timestamp, and every summary. Interactions
themselves are read from disk when a tool asks (they can be large). The view is refreshed only by the
indexer, so after a write has been submitted and awaited it includes that write.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from memoryd.board.gate import Skipped, UnsafePath
from memoryd.index.records import SourceBatch, records_by_id
from memoryd.kinds.sessions.files import (
    LOG_SUFFIX,
    MISNAMED,
    SESSIONS_DIR,
    SUMMARY_SUFFIX,
    FormatError,
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


#: The view's three maps: session -> SessionInfo, session -> Summary, origin -> Skipped.
_View = tuple[dict[str, SessionInfo], dict[str, Summary], dict[str, Skipped]]


class SessionSource:
    """Record source for ``sessions/`` plus the view described in the module docstring."""

    folders = (SESSIONS_DIR,)
    kinds = KINDS

    def __init__(self, board: Path) -> None:
        self.board = Path(board)
        self._lock = threading.Lock()
        self._logs: dict[str, SessionInfo] = {}
        self._summaries: dict[str, Summary] = {}
        self._skipped: dict[str, Skipped] = {}

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
            batch.add(origin, [interaction_record(i) for i in items])
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
