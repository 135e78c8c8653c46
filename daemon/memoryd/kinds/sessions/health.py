"""``healthcheck``: is every part of memoryd working right now? Degraded states say so, never "healthy".

Checks, each with its own entry under ``checks`` and a line in ``problems`` when it is not fine:

* daemon: version, uptime, sessions connected (the serving process's status, through the engine handle);
* engine: loading (degraded), failed (unhealthy), ready;
* board: the folder is readable (unhealthy when not: no answer can be trusted);
* index: records by kind, rows the BM25 index does not cover yet, rows without a vector, last optimize;
* freshness: the newest file change on the board vs. the last index write; stale (degraded) when a
  change older than :data:`FRESHNESS_SLACK_S` is newer than the last write;
* model: name and state; loading or failed -> degraded (search is keyword-only meanwhile); disabled by
  configuration (``--model none``) is noted, not a fault;
* watcher: alive, plus a heartbeat: a dotfile is created and removed in the board root and the watcher
  must see the event within :data:`HEARTBEAT_TIMEOUT_S` (the reader and the indexer ignore dotfiles). A
  stopped or stalled watcher is restarted on the spot and the answer is ``degraded`` with
  ``"restarted": true`` (edits made meanwhile are picked up by the rescan the restart triggers);
* disk: bytes used by the board and by the index (regular files, symlinks not followed);
* board files: those that could not be read (``skipped_files``; the first :data:`SKIPPED_SHOWN` named in
  ``skipped``) -> degraded: what they hold is missing from every answer.

``status`` is ``healthy`` only when every check is fine (Memory Core's enum: healthy|degraded|unhealthy).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from pathlib import Path
from typing import Any

from memoryd.tools.answers import Scrub
from memoryd.wording import counted

HEARTBEAT_TIMEOUT_S = 2.0
SKIPPED_SHOWN = 5
FRESHNESS_SLACK_S = 5.0


def _iso(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def disk_usage(root: Path) -> tuple[int, int, float | None]:
    """``(bytes, files, newest mtime)`` of regular files under ``root``; dotfiles count for bytes but
    not for the newest change (our own temp files)."""
    total = files = 0
    newest: float | None = None
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if st.st_mode & 0o170000 != 0o100000:
                    continue
                total += st.st_size
                files += 1
                if not name.startswith(".") and (newest is None or st.st_mtime > newest):
                    newest = st.st_mtime
    return total, files, newest


async def _heartbeat(watcher: Any, board: Path) -> tuple[bool, float | None]:
    """Create and remove a dotfile in the board root; True when the watcher saw it. Returns the delay."""
    before = watcher.last_event_at or 0.0
    started = time.monotonic()
    probe = board / f".memoryd-heartbeat-{secrets.token_hex(4)}"

    def touch() -> None:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        os.unlink(probe)

    try:
        await asyncio.to_thread(touch)
    except OSError:
        return False, None
    while time.monotonic() - started < HEARTBEAT_TIMEOUT_S:
        seen = watcher.last_event_at
        if seen is not None and seen > before and seen >= started:
            return True, round((seen - started) * 1000, 1)
        await asyncio.sleep(0.02)
    return False, None


def _restart(watcher: Any) -> None:
    """Start a stopped watcher, or replace a stalled observer; both end with a rescan of the board."""
    thread = getattr(watcher, "_thread", None)
    if thread is None or not thread.is_alive():
        watcher.start()
    watcher.restart()


async def watcher_check(engine: Any) -> dict[str, Any]:
    watcher = getattr(engine, "watcher", None)
    if watcher is None:
        return {"ok": False, "alive": False, "problem": "no board watcher in this daemon"}
    alive = watcher.alive() and getattr(watcher, "_thread", None) is not None and watcher._thread.is_alive()
    beat, delay = await _heartbeat(watcher, engine.board) if alive else (False, None)
    out: dict[str, Any] = {
        "alive": alive,
        "heartbeat": beat,
        "heartbeat_ms": delay,
        "last_event_age_s": None
        if watcher.last_event_at is None
        else round(time.monotonic() - watcher.last_event_at, 1),
    }
    if alive and beat:
        out["ok"] = True
        return out
    why = "stopped" if not alive else f"stalled (no event within {HEARTBEAT_TIMEOUT_S:g} s of a heartbeat)"
    try:
        await asyncio.to_thread(_restart, watcher)
        out["restarted"] = True
        out["alive_after_restart"] = watcher.alive()
        out["problem"] = f"board watcher was {why}; restarted it and rescanning the board"
    except Exception as exc:
        out["restarted"] = False
        out["problem"] = f"board watcher was {why} and could not be restarted: {type(exc).__name__}: {exc}"
    out["ok"] = False
    return out


async def healthcheck(handle: Any) -> dict[str, Any]:
    """The full health answer (see the module docstring). ``handle``: the process's EngineHandle."""
    from memoryd import __version__

    daemon = handle.process_status()
    problems: list[str] = []
    severe = False
    out: dict[str, Any] = {
        "status": "healthy",
        "timestamp": _iso(time.time()),
        "version": daemon.get("version") or __version__,
        "uptime_s": daemon.get("uptime_s"),
        "sessions_connected": daemon.get("sessions"),
        "engine": handle.state,
    }
    engine = handle.engine if handle.state == "ready" else None
    if engine is None:
        severe = handle.state in ("failed", "disabled", "closed")
        problems.append(f"engine is {handle.state}" + (f": {handle.error}" if handle.error else ""))
        return _finish(out, problems, severe)
    board = Path(engine.board)
    readable = os.access(board, os.R_OK | os.X_OK) and board.is_dir()
    out["board"] = {"path": str(board), "readable": readable}
    if not readable:
        problems.append(f"the board at {board} cannot be read")
        severe = True
    index_path = Path(engine.settings.locations.index)
    (board_bytes, board_files, newest), (index_bytes, _, _) = await asyncio.gather(
        asyncio.to_thread(disk_usage, board), asyncio.to_thread(disk_usage, index_path)
    )
    out["disk"] = {"board_bytes": board_bytes, "board_files": board_files, "index_bytes": index_bytes}
    out["index"] = await _index(engine, problems)
    idx = engine.indexer
    last = idx.last_indexed_at if idx else None
    lag = None if newest is None or last is None else round(newest - last, 1)
    stale = lag is not None and lag > 0 and time.time() - newest > FRESHNESS_SLACK_S
    out["freshness"] = {
        "newest_change_at": _iso(newest),
        "last_indexed_at": _iso(last),
        "lag_s": max(0.0, lag) if lag is not None else None,
        "fresh": not stale,
    }
    if stale:
        problems.append(f"the index is behind the board by {lag:g} s")
    model = engine.model
    out["model"] = {"name": model.name, "state": model.state, "detail": model.detail}
    if model.state == "disabled":  # chosen (--model none / MEMORYD_MODEL=none), not a fault
        out["model"]["note"] = "disabled by configuration: search is keyword-only"
    elif model.state != "ready":
        problems.append(f"embedding model {model.name} is {model.state}: search is keyword-only")
    out["watcher"] = await watcher_check(engine)
    if not out["watcher"]["ok"]:
        problems.append(out["watcher"]["problem"])
    skipped = idx.skipped() if idx is not None and hasattr(idx, "skipped") else []
    out["skipped_files"] = len(skipped)
    if skipped:  # what they hold is missing from every answer: not healthy, though the daemon works
        scrub = Scrub()  # a file name or a reason may quote what the file holds
        out["skipped"] = [{"path": scrub(s.path), "reason": scrub(s.reason)} for s in skipped[:SKIPPED_SHOWN]]
        named = "; ".join(f"{s['path']} ({s['reason']})" for s in out["skipped"])
        more = f"; and {len(skipped) - SKIPPED_SHOWN} more" if len(skipped) > SKIPPED_SHOWN else ""
        problems.append(
            f"{counted(len(skipped), 'board file')} could not be read, so what they hold is missing from answers "
            f"(fix or remove each; `memoryd doctor` names them all): {named}{more}"
        )
    return _finish(out, problems, severe)


async def _index(engine: Any, problems: list[str]) -> dict[str, Any]:
    from memoryd.index.health import index_health

    try:
        facts = await asyncio.to_thread(index_health, engine.store)
    except Exception as exc:
        problems.append(f"the index cannot be read: {type(exc).__name__}")
        return {"ok": False, "error": type(exc).__name__}
    facts["last_optimize_at"] = _iso(engine.indexer.last_optimize_at) if engine.indexer else None
    facts["path"] = str(engine.settings.locations.index)
    return facts


def _finish(out: dict[str, Any], problems: list[str], severe: bool) -> dict[str, Any]:
    if problems:
        out["status"] = "unhealthy" if severe else "degraded"
    out["problems"] = problems
    return out
