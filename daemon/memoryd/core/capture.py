"""Capture: agents' hook events become briefs, session turns, summaries and the session-start digest.

One :class:`Capture` per engine (~400 lines in one class on purpose: every event reads and updates the same
per-session state and the one filing lock). Its :meth:`Capture.handle` takes one neutral request (the hooks in
:mod:`memoryd_shim.hooks` translate each agent's JSON into it; ``memoryd brief`` sends one too)::

    {"event": "prompt", "agent", "session", "cwd", "prompt"}              -> {"brief", "task", "filed", "skipped", "context"}
    {"event": "stop",   "agent", "session", "cwd", "response", "stop_active"} -> {"block", "turn"}
    {"event": "start",  "agent", "session", "cwd", "source", "tokens"}    -> {"context"}
    {"event": "end",    "agent", "session", "cwd", "reason"}              -> {"summary"}
    {"event": "brief",  "text", "cwd"?, "project"?, "task"?, "new_task"?, "screens"?: [[png, txt|null]], "rid"?}
                                                                         -> {"brief", "task", "title", "filed", "project", "reopened", "board"}

Hook requests carry a ``rid`` (unique per event), recorded with what they file, so the spool can skip
what was filed already (:mod:`memoryd.core.delivery`); a person's brief carries one too, and a brief
request whose ``rid`` a brief on the board names is answered with that brief (``"filed": "already"``),
not filed again. Strings with lone surrogates are mended (U+FFFD),
not refused.

Every write is indexed through the engine's one writer before the answer goes out, except a prompt's:
it is answered once its files are written and queued for the index. The next filing (under the filing
lock, so two sessions sending one new prompt share one task) first passes the searcher's read barrier,
which waits for that indexing: it sees the brief in the index and its task in the board view.

What each session filed last (its task and brief, the prompt, whether the agent was already asked for an
outcome) lives in memory; for a session it does not remember (after a restart) it is recovered from the
board: the newest brief whose ``brief.json`` names that agent and session (``"captured"``) gives its
project, task, brief and prompt, so the session's next prompt stays in its task. That brief counts as asked for: a restart
never makes the Stop hook ask twice. A ``stop`` blocks (once) only for the brief the session's latest
prompt was filed as, and only while that brief has no ``outcome.md``: never for ids the prompt mentions.
A prompt that is memoryd's own Stop reason (it starts with :data:`REASON_START`), which an agent sent back
as its next request, is skipped (``"skipped": "memoryd"``) and leaves the session's state alone.
Raises ``ValueError`` for a request it cannot use (the control line answers with the message).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.board.gate import BRIEF_ID_PATTERN, is_task_id
from memoryd.core.delivery import Delivered, rid_of, turn_id
from memoryd.index.intent import open_listing
from memoryd.index.redact import redact
from memoryd.index.searcher import SearchQuery
from memoryd.kinds.briefs import capture as cap
from memoryd.kinds.briefs import digest as dig
from memoryd.kinds.briefs import filing, newbrief
from memoryd.kinds.briefs.context import Target
from memoryd.kinds.briefs.edits import set_task_status
from memoryd.kinds.sessions import files as sessions
from memoryd.kinds.sessions.summarize import extractive
from memoryd.logs import get_logger
from memoryd.project import branch_of, project_of
from memoryd.textcheck import without_lone_surrogates

log = get_logger("memoryd.core.capture")

MARKER = "[memoryd]"
#: How :func:`reason_for` starts: a prompt that starts so is that reason sent back, not the developer's words.
REASON_START = f"{MARKER} This turn answered memoryd brief "
SEARCH_POOL = 30
#: A prompt is filed by what it starts with: a pasted log or file adds little but search time (a 60,000
#: character prompt took seconds to search, most of it embedding and matching the whole text).
FILING_QUERY_CHARS = 1_000
_BRIEF_ID = re.compile(rf"(?<![0-9A-Za-z_-])({BRIEF_ID_PATTERN})(?![0-9A-Za-z_-])", re.ASCII)

#: ``index(briefs=, tasks=, paths=)``: queue changes for the writer before returning an awaitable that
#: resolves once they are searchable.
IndexFn = Callable[..., Awaitable[Any]]


@dataclass
class SessionState:
    """What one agent session filed last; ``asked``: briefs the agent was already asked to report on."""

    project: str = ""
    task: str | None = None
    brief: str | None = None
    prompt: str = ""
    asked: set[str] = field(default_factory=set)


def session_file_id(agent: str, session: str) -> str:
    """The ``sessions/<id>.jsonl`` id of an agent session: its own id when it fits the pattern."""
    if sessions.is_session_id(session):
        return session
    digest = hashlib.sha256(f"{agent}\0{session}".encode()).hexdigest()[:32]
    return f"{(agent or 'agent')[:20].replace('.', '-')}-{digest}"


def reason_for(brief: str) -> str:
    """The instruction a Stop hook hands back when the turn's captured brief has no outcome (asked once)."""
    return (
        f"{REASON_START}{brief}, and no outcome has been saved for it yet. "
        f"Before you stop, call the memoryd tool save_outcome with brief_id={brief!r}: `did` = what you did, "
        "`open` = what is still open or unverified (plus `decided`, `files`, `retired` when they apply). "
        "Then finish your answer."
    )


def _text(req: dict, key: str) -> str:
    value = req.get(key)
    return value if isinstance(value, str) else ""


class Capture:
    """Built by the engine from its collaborators (see the module docstring); never sees the engine."""

    def __init__(self, board: Path, briefs: Any, searcher: Any, context: Any, index: IndexFn) -> None:
        self.board = Path(board)
        self.briefs = briefs  #: :class:`memoryd.kinds.briefs.api.Briefs`
        self.searcher = searcher  #: :class:`memoryd.index.searcher.Searcher`
        self.context = context  #: :class:`memoryd.kinds.briefs.context.Context` (the digest's builder)
        self._index = index
        self._sessions: dict[tuple[str, str], SessionState] = {}
        self._filing = asyncio.Lock()  # two prompts at once must not both start "the" new task
        #: What was filed, by request id; ``delivered.applied`` is what the spool asks.
        self.delivered = Delivered(self.board, briefs, session_file_id)

    async def handle(self, req: Any) -> dict[str, Any]:
        """Answer one request (shapes in the module docstring). Raises ``ValueError`` for a bad one."""
        if not isinstance(req, dict):
            raise ValueError("a capture request must be a JSON object")
        req = without_lone_surrogates(req)
        event = req.get("event")
        handler = {
            "prompt": self.prompt,
            "stop": self.stop,
            "start": self.start,
            "end": self.end,
            "brief": self.person_brief,
        }.get(event)
        if handler is None:
            raise ValueError(f"unknown capture event {event!r}")
        return await handler(req)

    def _state(self, req: dict) -> SessionState:
        key = (_text(req, "agent"), _text(req, "session"))
        if key not in self._sessions:
            if len(self._sessions) > 4096:  # a long-lived daemon: forget the oldest sessions
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[key] = self._recover(*key)
        return self._sessions[key]

    def _recover(self, agent: str, session: str) -> SessionState:
        """The state of a session this process has not seen, from its newest captured brief (or empty)."""
        if not session:
            return SessionState()
        want = (agent[:200], session[:200])  # as :meth:`_captured` stored them
        newest = None
        for b in self.briefs.snapshot().briefs.values():
            if b.captured == want and (
                newest is None or (b.created_at, b.id) > (newest.created_at, newest.id)
            ):
                newest = b
        if newest is None:
            return SessionState()
        log.info("capture.session_recovered", agent=agent, brief=newest.id, task=newest.task)
        return SessionState(newest.project, newest.task, newest.id, newest.said, {newest.id})

    # -- prompt submitted ---------------------------------------------------------------------------------
    async def prompt(self, req: dict) -> dict[str, Any]:
        if _text(req, "prompt").lstrip().startswith(REASON_START):
            # Our own Stop reason: Gemini CLI goes on with it as the next request, firing BeforeAgent. The
            # turn still answers the brief it was asked about, so the session's state stays as it is.
            return {"brief": None, "task": None, "filed": None, "skipped": "memoryd", "context": None}
        clean = cap.clean_prompt(_text(req, "prompt"))
        if not clean.is_brief:
            if clean.text:  # an approval or a command is still what the turn answers
                self._state(req).prompt = clean.text
            return {"brief": None, "task": None, "filed": None, "skipped": clean.reason, "context": None}
        project = project_of(_text(req, "cwd") or None)
        state = self._state(req)
        async with self._filing:
            rid = rid_of(req)
            if rid in self.delivered:  # its spooled copy, taken while it was being filed
                return {"brief": None, "task": None, "filed": None, "skipped": "duplicate", "context": None}
            # the briefs and tasks filed before (their indexing may still run) are in the view and the index
            await self.searcher.settled()
            current = state.task if state.project == project and self._is_open(state.task) else None
            decision = await self._decide(clean.text[:FILING_QUERY_CHARS], project, current)
            brief_id, task_id, title = await self._write(
                clean.text, clean.text, project, decision.task, None, (), self._captured(req), wait=False
            )
            self.delivered.remember(rid)
        state.project, state.task, state.brief = project, task_id, brief_id
        state.prompt = clean.text
        log.info(
            "capture.prompt",
            brief=brief_id,
            task=task_id,
            filed=decision.reason,
            score=round(decision.score, 3),
            project=project,
        )
        joined = decision.task is not None
        if joined and (task := self.briefs.tasks().get(task_id)) is not None and task.title:
            title = task.title  # the task it joined is named by its own title, not this prompt's
        context = (
            f'{MARKER} memoryd filed this prompt as brief {brief_id} in task {task_id} ("{title}"'
            + (", which continues earlier work: get_task shows its history" if joined else ", a new task")
            + f"). When you finish, call the memoryd tool save_outcome with brief_id={brief_id!r}."
        )
        return {
            "brief": brief_id,
            "task": task_id,
            "filed": decision.reason,
            "skipped": None,
            "context": context,
        }

    def _is_open(self, task_id: str | None) -> bool:
        task = self.briefs.tasks().get(task_id) if task_id else None
        return task is not None and task.status == "open"

    @staticmethod
    def _captured(req: dict) -> dict[str, str]:
        captured = {k: _text(req, k)[:200] for k in ("agent", "session") if _text(req, k)}
        if rid := rid_of(req):
            captured["rid"] = rid
        return captured

    async def _decide(self, text: str, project: str, current: str | None) -> filing.Filing:
        named = filing.named_task(text, self._open_tasks(project), self._task_of_brief)
        if named is not None:
            return filing.Filing(named, 1.0, "named")
        scores, mode = await self.filing_scores(text, project)
        if not scores and current is None:
            return filing.Filing(None, 0.0, "new")
        return filing.choose_task(scores, current, len(text.split()), filing.DEFAULTS[mode])

    async def filing_scores(self, text: str, project: str) -> tuple[dict[str, float], str]:
        """``({open task of project: best 0–1 score of its briefs}, "hybrid"|"keyword")`` for a cleaned prompt:
        what :func:`memoryd.kinds.briefs.filing.choose_task` decides on (``memoryd eval --filing`` too)."""
        open_ids = self._open_tasks(project)
        if not open_ids or open_listing(text, {project}) is not None:
            # a prompt asking only what is open ("what's still open?") continues none of the open tasks
            # by its words: the search would list them all (or rank them by the word "open")
            return {}, self.searcher.mode
        result = await self.searcher.search(
            SearchQuery(text, project=project, kind="brief", status="open", limit=SEARCH_POOL)
        )
        mode = "hybrid" if result.mode == "hybrid" else "keyword"
        return filing.task_scores(((h.task, h.score) for h in result.hits), open_ids), mode

    def _task_of_brief(self, brief_id: str) -> str | None:
        brief = self.briefs.snapshot().briefs.get(brief_id)
        return brief.task if brief is not None else None

    def _open_tasks(self, project: str) -> set[str]:
        return {t.id for t in self.briefs.tasks().values() if t.status == "open" and t.project == project}

    async def _write(
        self,
        said: str,
        prompt: str,
        project: str,
        task_id: str | None,
        new_title: str | None,
        screens: tuple,
        captured: dict | None,
        wait: bool = True,
        touched: tuple[str, ...] = (),
    ) -> tuple[str, str, str]:
        """Write a brief (and its new task when ``task_id`` is None); index both, and the tasks ``touched``
        (their files changed); ``(brief, task, title)``.

        ``wait=False`` (a prompt hook, which the agent waits for): the files are written and fsynced before
        the answer and queued for the index, which runs after it; searches and the next filing wait for it
        through the read barrier (the board is the truth, so a crash in between only defers it to the next
        start's reconcile). A crash while the files are written leaves nothing half done on the board
        (:mod:`memoryd.kinds.briefs.newbrief`)."""
        now = cap.now_iso()
        title = cap.title_of(said)
        for attempt in range(5):  # a random id that happens to exist: draw again
            task = None
            if task_id is None:  # a new task, written with the brief
                task = newbrief.NewTask(cap.new_id("t"), cap.title_of(new_title or said), project, now)
            brief = newbrief.NewBrief(
                id=cap.new_id("b"),
                task=task.id if task is not None else task_id,
                project=project,
                created_at=now,
                title=title,
                summary=cap.summary_of(said),
                said=said,
                prompt=prompt,
                screens=screens,
                captured=captured,
            )
            try:
                # One thread writes the brief and its task: a cancelled call never leaves one without the other.
                await asyncio.to_thread(newbrief.write_brief, self.board, brief, task)
                break
            except FileExistsError:
                if attempt == 4:
                    raise
        new_tasks = [*touched, *([brief.task] if task is not None else [])]
        queued = self._index(briefs=[brief.id], tasks=new_tasks)  # queued now, before the answer
        if wait:
            await queued
        else:
            asyncio.ensure_future(queued).add_done_callback(functools.partial(_deferred, brief.id))
        return brief.id, brief.task, title

    # -- a person files a brief -----------------------------------------------------------------------------
    async def person_brief(self, req: dict) -> dict[str, Any]:
        clean = cap.clean_prompt(_text(req, "text"))
        if not clean.text:
            cut = " (after removing <private> text)" if clean.private else ""
            raise ValueError(f"the brief is empty{cut}: give the words of the brief")
        project = _text(req, "project") or project_of(_text(req, "cwd") or None)
        task = req.get("task")
        if task is not None:
            if not is_task_id(task) or task not in self.briefs.tasks():
                raise ValueError(f"no task {str(task)[:40]!r} on the board (memoryd tasks lists them)")
            if not _text(req, "project"):
                project = self.briefs.tasks()[task].project
        reopened = False
        screens = []
        pairs = req.get("screens") or []
        if not isinstance(pairs, list) or not all(isinstance(p, list) and 1 <= len(p) <= 2 for p in pairs):
            raise ValueError("screens is a list of [PNG path, text path or null]")
        for pair in pairs:
            screens.append(await asyncio.to_thread(cap.read_screen, *pair))
        new_title = _text(req, "new_task") or None
        rid = rid_of(req)
        async with self._filing:
            await self.searcher.settled()  # as a prompt's filing: what was filed before is in view
            if (filed_before := self._filed_as(rid)) is not None:
                return filed_before
            if task is None and new_title is None:
                decision = await self._decide(clean.text, project, None)
                task, filed = decision.task, decision.reason
            else:
                filed = "given" if task else "new"
                # A brief is work wanted: filed into a done task, that task has open work again. Left
                # done, the brief would be missing from every list of open work and session digest. The
                # file decides, not the view: a `tasks done` just before may not be indexed yet.
                if task:
                    reopened = await asyncio.to_thread(set_task_status, self.board, task, "open")
            brief_id, task_id, _ = await self._write(
                clean.text,
                clean.text,
                project,
                task,
                new_title,
                tuple(screens),
                {"agent": "person", **({"rid": rid} if rid else {})},
                touched=(task,) if reopened else (),
            )
        joined = self.briefs.tasks().get(task_id) if filed != "new" else None
        title = joined.title if joined is not None and joined.title else cap.title_of(new_title or clean.text)
        return {
            "brief": brief_id,
            "task": task_id,
            "title": title,
            "filed": filed,
            "project": project,
            "reopened": reopened,
            "board": str(self.board),
        }

    def _filed_as(self, rid: str | None) -> dict[str, Any] | None:
        """The answer for the brief a person's request ``rid`` was filed as already (``"filed":
        "already"``), else None: the command asks again when its daemon stopped before answering, and
        whoever files it (the next daemon, or the command itself) files it once."""
        if rid is None:
            return None
        snapshot = self.briefs.snapshot()
        brief = next((b for b in snapshot.briefs.values() if b.captured_rid == rid), None)
        if brief is None:
            return None
        task = snapshot.tasks.get(brief.task)
        return {
            "brief": brief.id,
            "task": brief.task,
            "title": task.title if task is not None and task.title else brief.title,
            "filed": "already",
            "project": brief.project,
            "reopened": False,
            "board": str(self.board),
        }

    # -- turn stopped ----------------------------------------------------------------------------------------
    async def stop(self, req: dict) -> dict[str, Any]:
        state = self._state(req)
        response, _ = cap.strip_private(_text(req, "response"))
        response = redact(response).text.strip()
        turn = False
        session = _text(req, "session")
        rid = rid_of(req)
        if response and session and rid not in self.delivered:
            item = sessions.Interaction.new(
                session_file_id(_text(req, "agent"), session), state.prompt, "", response
            )
            if rid is not None:  # names its request, for the spool (memoryd.core.delivery)
                item = dataclasses.replace(item, id=turn_id(item.timestamp, rid))
            try:
                path = await asyncio.to_thread(sessions.append_interaction, self.board, item)
            except sessions.SessionFull as exc:  # the turn is dropped; the rest of the stop still runs
                log.warning("capture.session_full", session=session, reason=str(exc))
            else:
                self.delivered.remember(rid)
                await self._index(paths=[path.relative_to(self.board).as_posix()])
                turn = True
        block = None
        # Only the brief captured for this turn: ids the prompt merely mentions are other work, and a brief
        # that has an outcome already would get it replaced (save_outcome rewrites outcome.md).
        brief = state.brief
        if (
            req.get("stop_active") is not True
            and brief
            and brief not in state.asked
            and not self._has_outcome(brief)
        ):
            state.asked.add(brief)
            block = reason_for(brief)
        return {"block": block, "turn": turn}

    def _has_outcome(self, brief: str) -> bool:
        folder = self.board / "briefs" / brief
        if not folder.is_dir():
            return True  # nothing to report on
        return (folder / "outcome.md").exists()

    # -- session end / compaction ------------------------------------------------------------------------------
    async def end(self, req: dict) -> dict[str, Any]:
        session = _text(req, "session")
        if not session:
            return {"summary": False}
        sid = session_file_id(_text(req, "agent"), session)
        found = await asyncio.to_thread(sessions.read_log, self.board, sid)
        if found is None or not found.interactions:
            return {"summary": False}
        summary = extractive(sid, found.interactions)
        path = await asyncio.to_thread(sessions.write_summary, self.board, summary)
        await self._index(paths=[path.relative_to(self.board).as_posix()])
        return {"summary": True}

    # -- session start ----------------------------------------------------------------------------------------
    async def start(self, req: dict) -> dict[str, Any]:
        tokens = req.get("tokens", dig.DEFAULT_TOKENS)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise ValueError("tokens must be a whole number >= 0")
        cwd = _text(req, "cwd") or None
        target = Target(project_of(cwd), "cwd", branch_of(cwd))
        # the agent waits for this: the board as indexed now, not after writes still in flight
        built = await self.context.digest(target, tokens, self._state(req).prompt, settle=False)
        return {"context": built.text}


def _deferred(brief_id: str, fut: asyncio.Future) -> None:
    """A prompt's indexing that failed after its answer: the files are on the board, the next start's
    reconcile indexes them."""
    if not fut.cancelled() and (exc := fut.exception()) is not None:
        log.warning("capture.index_deferred", brief=brief_id, error=f"{type(exc).__name__}: {exc}")
