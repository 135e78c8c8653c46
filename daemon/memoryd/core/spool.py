"""Taking in the capture spool: hook events that found no daemon, filed when the engine starts.

Hooks append one JSON request per line to ``<state>/capture-spool.jsonl``
(:func:`memoryd_shim.rendezvous.capture_spool_path_str`), each with a unique ``"rid"`` (``"id"`` from
older hooks), whenever they got no answer: no daemon, or one that died, stopped or was too slow to
answer in time - which may have filed the request all the same. At start the engine renames the spool
to ``capture-spool.taking-<pid>.jsonl`` (so hooks firing meanwhile start a fresh one) and, in order,
skips each request the board shows filed already (:meth:`memoryd.core.delivery.Delivered.applied`: a brief
or a session turn naming its rid), hands the others to :meth:`memoryd.core.capture.Capture.handle`, and
notes each id it finished in ``capture-spool.taken`` - so a daemon stopped half-way never files a request
twice: the next start picks up the left-over ``taking`` files and skips what ``taken`` names. A request
the handler refuses goes to ``capture-spool.rejected.jsonl`` with the reason (nothing is dropped
silently). When every file is done, the ``taken`` notes go too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memoryd.logs import get_logger
from memoryd_shim import rendezvous

log = get_logger("memoryd.core.spool")

TAKING_PREFIX = "capture-spool.taking-"
TAKEN_NAME = "capture-spool.taken"
REJECTED_NAME = "capture-spool.rejected.jsonl"


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _claim(state: Path) -> list[Path]:
    """The spool files to take, oldest first: left-over ``taking`` files, then the live spool (renamed)."""
    leftovers = sorted(state.glob(TAKING_PREFIX + "*.jsonl"), key=lambda p: p.stat().st_mtime)
    live = state / rendezvous.CAPTURE_SPOOL_NAME
    mine = state / f"{TAKING_PREFIX}{os.getpid()}.jsonl"
    with contextlib.suppress(FileNotFoundError):
        if mine.exists():  # a pid reused from an earlier daemon: keep its lines, in order
            mine = state / f"{TAKING_PREFIX}{os.getpid()}-{os.urandom(3).hex()}.jsonl"
        os.rename(live, mine)
        leftovers.append(mine)
    return leftovers


def _request_id(req: Any) -> str | None:
    if not isinstance(req, dict):
        return None
    rid = req.get("rid", req.get("id"))
    return rid if isinstance(rid, str) else None


async def take_spool(
    state: Path,
    handle: Callable[[Any], Awaitable[Any]],
    applied: Callable[[Any], Awaitable[bool]] | None = None,
) -> int:
    """File every spooled request through ``handle``, except those ``applied`` says were filed already;
    returns how many were filed now. Never raises for a bad line or a failed request (logged and kept in
    the rejected file)."""
    state = Path(state)
    try:
        files = await asyncio.to_thread(_claim, state)
    except OSError as exc:
        log.warning("spool_unreadable", state=str(state), error=str(exc))
        return 0
    if not files:
        return 0
    taken_path = state / TAKEN_NAME
    try:
        taken = set(taken_path.read_text("utf-8").split())
    except (OSError, UnicodeDecodeError):
        taken = set()
    filed = 0
    for path in files:
        try:
            lines = (await asyncio.to_thread(path.read_bytes)).decode("utf-8", "replace").splitlines()
        except OSError as exc:
            log.warning("spool_unreadable", file=str(path), error=str(exc))
            continue
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except ValueError:
                req = None
            rid = _request_id(req)
            if rid and rid in taken:
                continue
            try:
                if not isinstance(req, dict):
                    raise ValueError("not a JSON object")
                if applied is not None and await applied(req):
                    log.info(
                        "spool_request_applied", file=path.name, line=number, capture_event=req.get("event")
                    )
                    skipped = True
                else:
                    skipped = False
                    await handle(req)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # kept with its reason; the others still get filed
                log.warning("spool_request_rejected", file=path.name, line=number, error=str(exc))
                await asyncio.to_thread(
                    _append, state / REJECTED_NAME, json.dumps({"error": str(exc), "line": line})
                )
            else:
                filed += not skipped
            if rid:
                taken.add(rid)
                await asyncio.to_thread(_append, taken_path, rid)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    if not any(state.glob(TAKING_PREFIX + "*.jsonl")):
        with contextlib.suppress(FileNotFoundError):
            taken_path.unlink()
    log.info("spool_taken", filed=filed, files=len(files))
    return filed
