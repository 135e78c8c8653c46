"""Which capture requests were filed already, by the ``rid`` every hook request carries.

A hook spools a request whenever it got no answer line in time, though the daemon may have taken it all
the same (it was only slow, or died after filing it). So what capture files names its request: a prompt's
brief in ``brief.json``'s ``"captured": {"rid"}``, a session turn in its interaction id
(``mem_<timestamp>_<rid>``, :func:`turn_id`). When the spool is taken in (:mod:`memoryd.core.spool`),
:meth:`Delivered.applied` skips what the board shows filed, and what this process filed lately (a spooled
copy of a request still being filed). A session end rebuilds the summary from the session's turns, so
doing it twice is harmless: it is never "applied".
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.kinds.sessions import files as sessions
from memoryd.logs import get_logger

log = get_logger("memoryd.core.delivery")

#: How many request ids the process remembers.
RECENT = 10_000
_RID = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)


def rid_of(req: Any) -> str | None:
    """The request's ``rid`` when it is one (1-64 ASCII letters, digits, ``_``, ``-``), else None."""
    value = req.get("rid") if isinstance(req, dict) else None
    return value if isinstance(value, str) and _RID.fullmatch(value) else None


def turn_id(timestamp: str, rid: str) -> str:
    """The interaction id of the turn a request with ``rid`` appends (fits the interaction id pattern)."""
    return f"mem_{timestamp}_{rid}"


class Delivered:
    """The request ids this process filed (most recent :data:`RECENT`), and the board's for the rest."""

    def __init__(self, board: Path, briefs: Any, session_file: Callable[[str, str], str]) -> None:
        self.board = Path(board)
        self.briefs = briefs  #: :class:`memoryd.kinds.briefs.api.Briefs`
        self.session_file = session_file  #: ``(agent, session) -> sessions/<id>.jsonl id``
        self._recent: dict[str, None] = {}  # insertion order: oldest first

    def __contains__(self, rid: str | None) -> bool:
        return rid is not None and rid in self._recent

    def remember(self, rid: str | None) -> None:
        if rid is not None:
            self._recent[rid] = None
            if len(self._recent) > RECENT:
                self._recent.pop(next(iter(self._recent)))

    async def applied(self, req: Any) -> bool:
        """Whether ``req`` (a spooled request) was filed already: see the module docstring."""
        rid = rid_of(req)
        if rid is None:
            return False
        if rid in self._recent:
            return True
        if req.get("event") == "prompt":
            return any(b.captured_rid == rid for b in self.briefs.snapshot().briefs.values())
        session = req.get("session")
        if req.get("event") != "stop" or not isinstance(session, str) or not session:
            return False
        agent = req.get("agent")
        sid = self.session_file(agent if isinstance(agent, str) else "", session)
        try:
            found = await asyncio.to_thread(sessions.read_log, self.board, sid)
        except (OSError, ValueError) as exc:  # unreadable here: filing it again is the lesser harm
            log.warning("capture.log_unreadable", session=sid, error=str(exc))
            return False
        suffix = f"_{rid}"
        return found is not None and any(i.id.endswith(suffix) for i in found.interactions)
