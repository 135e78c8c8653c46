"""The session-start digest of one project, gathered from the board, the memories and the model's tokenizer.

The one builder of the digest: the session-start hook (:mod:`memoryd.core.capture`), the ``get_context``
tool and the ``briefs://context`` resources all call :meth:`Context.digest`; the text's shape and the
budget rules are in :mod:`memoryd.kinds.briefs.digest`.

What goes in, for ``project``:

* its open tasks, newest activity first, each with the Open items of its latest brief that has an outcome
  with any;
* its latest briefs, newest first;
* the memories most related to ``query`` (the agent's last prompt, or what a caller asked for), else to the
  checked-out branch (unless it is a trunk such as ``main``), else to the latest brief's title.

Texts come from the indexer's snapshot of the board, which the reader redacted as it read each file;
memories are redacted here. Tokens are counted with the embedding model's tokenizer once it is loaded,
else with :func:`~memoryd.kinds.briefs.digest.estimate_tokens` (which never counts fewer).

A session-start hook waits for its digest, so the last :data:`CACHE_SIZE` digests asked for are kept, each
with the board's generation (the index's change count) it was built at, and :meth:`Context.keep_warm`
rebuilds them in the background after each burst of changes: a hook usually finds its digest ready.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memoryd.index.redact import redact
from memoryd.kinds.briefs import digest as dig
from memoryd.logs import get_logger
from memoryd.project import branch_of, project_of

if TYPE_CHECKING:  # the tool registry imports this module before the index library loads
    from memoryd.index.searcher import Searcher
    from memoryd.kinds.briefs.api import Briefs
    from memoryd.kinds.memories.api import Memories

log = get_logger("memoryd.kinds.briefs.context")

_TRUNK = frozenset({"main", "master", "trunk", "develop", "dev", "HEAD", ""})

#: Digests kept for reuse (the most recently asked for).
CACHE_SIZE = 8
#: Changes arriving within this many seconds of each other are one background rebuild.
SETTLE_S = 0.3

#: Where the project of a digest came from (``Digest.source``).
SOURCES = ("argument", "cwd", "recent", "none")


@dataclass(frozen=True)
class Digest:
    """One built digest. ``text`` is ``""`` when the budget is 0 or nothing recorded fits; ``tokens`` is
    its size counted by ``counter`` (``"model"``: the embedding model's tokenizer; ``"estimate"``);
    ``fresh``: for each placeholder of ``text``, in order, whether it was written as the board was read
    (``False``: its file held it already), so an answer counts only secrets redacted from the files."""

    project: str
    source: str
    budget: int
    text: str
    tokens: int
    counter: str
    fresh: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Target:
    """Which project a digest is for, where that came from, and the branch to relate memories to."""

    project: str
    source: str
    branch: str = ""


class Context:
    """Built by the engine from the briefs API, the searcher (for its tokenizer) and the memories API."""

    def __init__(
        self,
        briefs: Briefs,
        searcher: Searcher,
        memories: Memories,
        generation: Callable[[], int] = lambda: 0,
    ) -> None:
        self.briefs = briefs
        self.searcher = searcher
        self.memories = memories
        self._generation = generation  # grows with every change the index applies
        self._cache: OrderedDict[tuple, tuple[int, Digest]] = OrderedDict()

    def projects(self) -> set[str]:
        """Every project that has a task on the board."""
        return {task.project for task in self.briefs.tasks().values()}

    async def recent_project(self) -> str | None:
        """The project of the task with the newest activity (any status; ``""``: filed without a project),
        or None on a board with no task."""
        rows = await self.briefs.list_tasks()
        return rows[0][0].project if rows else None

    async def target(self, project: str | None, cwd: str | None) -> Target:
        """The project a caller means: ``project`` as given (in the board's spelling when it differs only in
        case); else the project of ``cwd`` (:func:`memoryd.project.project_of`); else the
        most recently active project on the board; else ``""`` (source ``"none"``). The branch checked out
        at ``cwd`` comes along when the project is the one of ``cwd``."""
        if project is not None:
            project = self.briefs.spelling(project)
            same = project == project_of(cwd)  # the caller's own project: its branch still helps
            return Target(project, "argument", branch_of(cwd) if same else "")
        here = project_of(cwd)
        if here:
            return Target(here, "cwd", branch_of(cwd))
        recent = await self.recent_project()
        return Target(recent, "recent") if recent is not None else Target("", "none")

    def counter(self) -> tuple[Any, str]:
        """``(count, name)``: the model's token counter once it is loaded, else the estimate."""
        embedder = self.searcher.embedder
        if embedder is not None:
            return embedder.count_tokens, "model"
        return dig.estimate_tokens, "estimate"

    async def digest(self, target: Target, budget: int, query: str = "", settle: bool = True) -> Digest:
        """The digest of ``target.project`` within ``budget`` tokens (0: off, an empty text); a kept one
        when the board has not changed since it was built. ``settle=False`` (the session-start hook, which
        the agent waits for): the board as indexed now, without waiting for writes still in flight, such
        as another session's prompt filed a moment ago.

        Raises :class:`memoryd.kinds.briefs.source.BoardUnreadable` when the board cannot be read; a failed
        memory search leaves the memories out rather than failing the digest."""
        if settle:  # writes acknowledged before are in the index, the views, the generation
            await self.searcher.settled()
        count, counter = self.counter()
        key = (target, budget, query, counter)
        generation = self._generation()  # read first: a change during the build makes the next call rebuild
        kept = self._cache.get(key)
        if kept is not None and kept[0] == generation:
            self._cache.move_to_end(key)
            return kept[1]
        built = await self._build(target, budget, query, count, counter, settle)
        self._cache[key] = (generation, built)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return built

    async def keep_warm(self, subscribe: Callable[[], Any]) -> None:
        """Rebuild the kept digests after each burst of board changes, until the feed ends.

        ``subscribe``: :meth:`memoryd.core.writequeue.ChangeFeed.subscribe` (a context manager giving a
        queue of events; ``None`` ends it)."""
        with subscribe() as queue:
            while await queue.get() is not None:
                await asyncio.sleep(SETTLE_S)
                while not queue.empty():
                    if queue.get_nowait() is None:
                        return
                for target, budget, query, counter in list(self._cache):
                    if counter != self.counter()[1]:
                        continue  # built with the estimate before the model loaded: rebuilt when asked
                    try:
                        await self.digest(target, budget, query)
                    except Exception as exc:  # the next hook builds it itself
                        log.warning("context.rebuild_failed", error=f"{type(exc).__name__}: {exc}")

    async def _build(
        self, target: Target, budget: int, query: str, count, counter: str, settle: bool = True
    ) -> Digest:
        if budget <= 0:
            return Digest(target.project, target.source, budget, "", 0, counter)
        project = target.project
        recent = heapq.nlargest(
            dig.BRIEFS_MAX,
            (b for b in self.briefs.snapshot().briefs.values() if b.project == project),
            key=lambda b: (b.created_at, b.id),
        )
        briefs = [dig.RecentBrief(b.id, b.task, b.created_at, b.title or b.summary) for b in recent]
        # which placeholders the files held already (memoryd.kinds.briefs.files.Held), for the answer's count
        held: dict[str, tuple[bool, ...]] = {}
        for b in recent:
            held.update(b.held)
        branch = target.branch
        about = query or (branch.replace("/", " ").replace("-", " ") if branch not in _TRUNK else "")
        about = about or (recent[0].title if recent else "")
        # the memory search (a query embedding, in a worker thread) overlaps the task scan
        related = asyncio.ensure_future(self._memories(about, project, settle)) if about else None
        rows = await self.briefs.list_tasks(project, "open", settle=settle)
        tasks = []
        for t, last, n in rows[: dig.OPEN_TASKS_MAX]:
            tasks.append(dig.OpenTask(t.id, t.title, n, last, self._open_items(t.id, held)))
            held.update(t.held)
        memories = await related if related is not None else []
        for text, fresh in memories:
            if fresh is not None:
                held[text.strip()] = fresh
        data = dig.DigestInput(
            project=project, tasks=tasks, briefs=briefs, memories=[text for text, _ in memories], held=held
        )

        def render() -> tuple[str, tuple[bool, ...], int]:
            text, fresh = dig.digest_text(data, budget, count)
            return text, fresh, count(text) if text else 0

        text, fresh, tokens = await asyncio.to_thread(render)
        return Digest(project, target.source, budget, text, tokens, counter, fresh)

    async def _memories(
        self, query: str, project: str, settle: bool = True
    ) -> list[tuple[str, tuple[bool, ...] | None]]:
        """The related memories' contents, redacted, each with :attr:`Redacted.fresh` (which placeholders
        the redaction wrote; None: the content held none)."""
        try:
            found = await self.memories.search(
                query, project=project or None, limit=dig.MEMORIES_MAX, touch=False, settle=settle
            )
        except Exception as exc:  # the digest goes out without memories rather than not at all
            log.warning("context.memories_failed", error=str(exc))
            return []
        return [(red.text, red.fresh) for red in (redact(s.memory.content) for s in found.memories)]

    def _open_items(self, task_id: str, held: dict[str, tuple[bool, ...]]) -> tuple[str, ...]:
        """The Open items of the task's latest brief that has any (its ``held`` added to ``held``)."""
        for brief in reversed(self.briefs.briefs_of(task_id)):
            if brief.outcome is not None and brief.outcome.open:
                held.update(brief.held)
                return brief.outcome.open
        return ()
