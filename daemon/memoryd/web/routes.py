"""The page's URL map and handlers: :func:`routes` (what the HTTP listener mounts at ``/``).

Reads
    ``GET /`` tasks by project; ``/task/{id}`` a task's briefs; ``/search?q=`` briefs and memories with why
    they matched; ``/memories`` memories, tags and their graph; ``/sessions`` session summaries;
    ``/shot/{brief}/{n}`` a screenshot's PNG (read through the board's gate); ``/events`` live changes
    (SSE); ``/static/*`` the stylesheet and script. A request with ``X-Memoryd-Partial: 1`` gets only the
    contents of ``<main>`` (the live refresh).
Deletes (POST)
    ``/memories/{id}/delete``, ``/brief/{id}/notes/{i}/{digest}/delete``, ``/brief/{id}/screens/{n}/delete``.
    CSRF: the auth cookie is ``SameSite=Strict``, so another site's form never carries it; on top of that
    each form carries this process's random token (a page of another origin cannot read it), and a
    browser's ``Sec-Fetch-Site`` other than ``same-origin`` is refused. Answered with 303 back to the page
    (a plain form post), or ``{"ok": true}`` when the page's script asks (``X-Memoryd-Fetch: 1``).
Failures
    a malformed id or unknown item -> 404; the engine loading -> 503 with ``Retry-After``; the board
    unreadable -> 503 saying so; a bad or missing CSRF token -> 403. Pages are ``Cache-Control: no-store``.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from memoryd.board.gate import UnsafePath
from memoryd.errors import BoardUnreadable, EngineUnavailable, InvalidParams, NotFound, WarmingUp
from memoryd.kinds.briefs import render as briefs_render
from memoryd.kinds.briefs import render_brief as briefs_render_brief
from memoryd.kinds.briefs import render_tasks as briefs_render_tasks
from memoryd.kinds.briefs.edits import EditRefused
from memoryd.kinds.memories import render as memories_render
from memoryd.kinds.memories.graph import Edge, edges_of
from memoryd.kinds.memories.rules import InvalidMemory, MemoryNotFound
from memoryd.kinds.sessions import render as sessions_render
from memoryd.logs import get_logger
from memoryd.tools.answers import Scrub
from memoryd.web import events, memview, pages, search
from memoryd.web.html import PARTIAL_HEADER, esc, page

log = get_logger("memoryd.web")

STATIC = Path(__file__).parent / "static"
#: How long a page waits for the engine while the daemon starts.
ENGINE_WAIT_S = 5.0
#: Memories listed on the memories page (the newest).
MEMORIES_SHOWN = 300
QUERY_CHARS = 1000
NO_STORE = {"Cache-Control": "no-store"}

Handler = Callable[[Request], Awaitable[Response]]


def _safe_back(value: object, default: str) -> str:
    """A same-site path to return to after a delete (never ``//host`` or a scheme)."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return default


class Web:
    """The handlers, sharing the engine slot and this process's CSRF token."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.csrf = secrets.token_urlsafe(32)

    # -- plumbing ---------------------------------------------------------------------------------------
    @staticmethod
    def guarded(fn: Handler) -> Handler:
        @functools.wraps(fn)
        async def run(request: Request) -> Response:
            try:
                return await fn(request)
            except (NotFound, MemoryNotFound, InvalidParams, InvalidMemory, UnsafePath) as exc:
                return _problem(request, 404, "Not found", str(exc))
            except WarmingUp as exc:
                return _problem(request, 503, "memoryd is starting", str(exc), {"Retry-After": "2"})
            except (BoardUnreadable, EngineUnavailable) as exc:
                return _problem(request, 503, "memoryd cannot answer", str(exc))
            except EditRefused as exc:
                return _problem(request, 409, "Not deleted", str(exc))

        return run

    async def engine(self) -> Any:
        return await self.handle.get(wait_s=ENGINE_WAIT_S)

    @staticmethod
    def respond(request: Request, title: str, main: str, active: str = "", query: str = "") -> Response:
        if request.headers.get(PARTIAL_HEADER) == "1":
            return HTMLResponse(main, headers=NO_STORE)
        return HTMLResponse(page(title, main, active=active, query=query), headers=NO_STORE)

    async def checked_form(self, request: Request) -> dict[str, str]:
        """The POSTed form, once its CSRF token and fetch metadata pass; raises PermissionError."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            raise PermissionError("cross-site request")
        form = await request.form()
        token = form.get("csrf")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.csrf.encode()):
            raise PermissionError("missing or wrong form token")
        return {k: v for k, v in form.items() if isinstance(v, str)}

    async def deleted(
        self, request: Request, work: Callable[[Any], Awaitable[None]], default_back: str
    ) -> Response:
        try:
            form = await self.checked_form(request)
        except PermissionError as exc:
            log.warning("web_delete_refused", reason=str(exc))
            return _problem(request, 403, "Refused", "This delete did not come from memoryd's own page.")
        await work(await self.engine())
        if request.headers.get("x-memoryd-fetch") == "1":
            return JSONResponse({"ok": True}, headers=NO_STORE)
        return RedirectResponse(_safe_back(form.get("back"), default_back), status_code=303)

    # -- pages ------------------------------------------------------------------------------------------
    async def tasks(self, request: Request) -> Response:
        engine = await self.engine()
        rows = await engine.briefs.list_tasks()
        answer = briefs_render_tasks.tasks_answer(
            rows,
            limit=max(1, len(rows)),
            project=None,
            status=None,
            projects={t.project for t, _, _ in rows},
        )
        return self.respond(request, "Tasks", pages.tasks(answer), "/")

    async def task(self, request: Request) -> Response:
        engine = await self.engine()
        found = await engine.briefs.get_task(request.path_params["task_id"])
        if found is None:
            raise NotFound("No such task on the board (it may have been deleted).")
        task, briefs = found
        head = briefs_render_tasks.task_answer(task, briefs)
        shown = briefs[-briefs_render.TASK_BRIEFS :]
        details = [(briefs_render_brief.brief_answer(b, task, engine.briefs.board), b.notes) for b in shown]
        return self.respond(request, head["task"]["title"], pages.task(head, details, self.csrf), "/")

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "")[:QUERY_CHARS]
        if not query.strip():
            return self.respond(request, "Search", search.view(query, None, [], []), "/search")
        engine = await self.engine()
        result = await engine.searcher.search(briefs_render.search_query(query, reasons=True))
        answer = briefs_render.search_answer(
            result,
            limit=search.SHOWN,
            project=briefs_render.listing_scope(result, None),
            model_state=engine.model.state,
        )
        found = await engine.memories.search(query, limit=search.SHOWN, touch=False, reasons=True)
        scrub = Scrub()
        memories = [
            (memories_render.memory(s.memory, scrub, memories_render.LIST_CONTENT_CHARS), s.relevance, s.why)
            for s in found.memories
        ]
        main = search.view(query, answer, result.hits, memories, found.mode)
        return self.respond(request, f"Search: {query}", main, "/search", query)

    async def memories(self, request: Request) -> Response:
        engine = await self.engine()
        await engine.memories.settled()
        view = engine.memories.view
        everything = sorted(view.all(), key=lambda m: (m.created_at, m.id), reverse=True)
        shown = everything[:MEMORIES_SHOWN]
        scrub = Scrub()
        answers = [memories_render.memory(m, scrub, memories_render.LIST_CONTENT_CHARS) for m in shown]
        ids = {m.id for m in shown}
        edges: list[Edge] = []
        rels: dict[str, list[dict[str, Any]]] = {}
        for m in shown:
            for e in edges_of(view, m, "outgoing")[0]:
                if e.to_id not in ids:
                    continue
                shown_edge = Edge(e.id, e.from_id, e.to_id, scrub(e.type), e.created_at)
                edges.append(shown_edge)
                answer = memories_render.relationship(e, scrub)
                rels.setdefault(e.from_id, []).append(answer)
                if e.to_id != e.from_id:
                    rels.setdefault(e.to_id, []).append(answer)
        main = memview.view(answers, edges, rels, len(everything), self.csrf)
        return self.respond(request, "Memories", main, "/memories")

    async def sessions(self, request: Request) -> Response:
        engine = await self.engine()
        src = getattr(engine.indexer, "sources", {}).get("sessions")
        if src is None:
            return self.respond(
                request, "Sessions", "<h1>Sessions</h1><p>No sessions source.</p>", "/sessions"
            )
        scrub = Scrub()
        summaries = sorted(src.summaries(), key=lambda s: s.timestamp, reverse=True)
        items = [sessions_render.summary_item(s, scrub) for s in summaries]
        logs = sorted(src.sessions(), key=lambda i: i.last_at, reverse=True)
        return self.respond(request, "Sessions", pages.sessions(items, logs), "/sessions")

    async def shot(self, request: Request) -> Response:
        engine = await self.engine()
        name = request.path_params["name"].removesuffix(".png")
        try:
            data = await engine.briefs.screenshot(request.path_params["brief_id"], name)
        except EditRefused as exc:
            raise NotFound(str(exc)) from None
        return Response(
            data, media_type="image/png", headers={**NO_STORE, "X-Content-Type-Options": "nosniff"}
        )

    async def events(self, request: Request) -> Response:
        return await events.stream(await self.engine(), request)

    # -- deletes ----------------------------------------------------------------------------------------
    async def delete_memory(self, request: Request) -> Response:
        key = request.path_params["memory_id"]
        return await self.deleted(request, lambda e: e.memories.delete(key), "/memories")

    async def delete_note(self, request: Request) -> Response:
        p = request.path_params
        return await self.deleted(
            request,
            lambda e: e.briefs.delete_note(p["brief_id"], p["index"], p["digest"]),
            "/",
        )

    async def delete_screen(self, request: Request) -> Response:
        p = request.path_params
        return await self.deleted(request, lambda e: e.briefs.delete_screen(p["brief_id"], p["name"]), "/")


def _problem(
    request: Request, status: int, title: str, message: str, headers: dict | None = None
) -> Response:
    headers = {**NO_STORE, **(headers or {})}
    if request.headers.get("x-memoryd-fetch") == "1":
        return JSONResponse({"ok": False, "error": message}, status_code=status, headers=headers)
    main = (
        f'<h1>{esc(title)}</h1><p class="problem">{esc(message)}</p><p><a href="/">Back to the tasks</a></p>'
    )
    if request.headers.get(PARTIAL_HEADER) == "1":
        return HTMLResponse(main, status_code=status, headers=headers)
    return HTMLResponse(page(title, main), status_code=status, headers=headers)


def routes(engine: Any) -> list[BaseRoute]:
    """The page's routes for the listener to mount at ``/``. ``engine``: the process's
    :class:`memoryd.core.warmup.EngineHandle` (pages wait up to :data:`ENGINE_WAIT_S` while it loads)."""
    web = Web(engine)
    g = Web.guarded
    return [
        Route("/", g(web.tasks), methods=["GET"]),
        Route("/task/{task_id}", g(web.task), methods=["GET"]),
        Route("/search", g(web.search), methods=["GET"]),
        Route("/memories", g(web.memories), methods=["GET"]),
        Route("/sessions", g(web.sessions), methods=["GET"]),
        Route("/shot/{brief_id}/{name}", g(web.shot), methods=["GET"]),
        Route("/events", g(web.events), methods=["GET"]),
        Route("/memories/{memory_id}/delete", g(web.delete_memory), methods=["POST"]),
        Route("/brief/{brief_id}/notes/{index:int}/{digest}/delete", g(web.delete_note), methods=["POST"]),
        Route("/brief/{brief_id}/screens/{name}/delete", g(web.delete_screen), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
