"""What ``memoryd serve`` runs with: :class:`ServeConfig`, the process's :class:`memoryd.settings.Settings`
plus the objects serving needs (the engine factory, the tool registry, the index's writer lock).

The engine is found by convention: ``memoryd.core.engine.open_engine(settings, index_lock=...)`` returning an
awaitable of the engine (see :mod:`memoryd.core.warmup`). Without a ``memoryd.core.engine`` module the daemon
serves without one (tools that need it say so).

The index's writer lock (:class:`memoryd.index.lock.IndexLock`) is made here, once: the daemon takes it
with its other locks before binding (so a second writer of the index is refused at start-up, exit 4) and
the engine opens its store under that same, already held, lock.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memoryd import __version__
from memoryd.core.warmup import EngineFactory
from memoryd.errors import StartupError
from memoryd.index.lock import IndexLock
from memoryd.paths import Locations
from memoryd.serve import lock

if TYPE_CHECKING:
    from memoryd.settings import Settings
    from memoryd.tools.registry import ToolRegistry

DEFAULT_TOOL_TIMEOUT_MS = 15_000


@dataclass(frozen=True)
class ServeConfig:
    """Everything the daemon needs, resolved once (logged at start-up by :meth:`effective`)."""

    locations: Locations
    engine_factory: EngineFactory | None = field(default=None, compare=False)
    registry: ToolRegistry | None = field(default=None, compare=False)  # None: tools.build_registry()
    version: str = __version__
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_MS / 1000
    lock_wait_s: float = lock.DEFAULT_LOCK_WAIT_S
    test_tools: bool = False
    #: Also serve HTTP (MCP at /mcp and the page) on 127.0.0.1/::1 at this port; 0: off.
    http_port: int = 0
    instructions: str | None = None
    settings: Any = field(default=None, compare=False, repr=False)
    #: The index's writer lock, taken by the daemon and shared with the engine (None: no engine index).
    index_lock: IndexLock | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ServeConfig:
        """From the process's ``Settings``; ``overrides`` (any field) win. The engine by convention unless
        ``engine_factory`` is given, with the index's writer lock it opens its store under."""
        overrides.setdefault("tool_timeout_s", settings.tool_timeout_ms / 1000)
        overrides.setdefault("lock_wait_s", settings.lock_wait_ms / 1000)
        overrides.setdefault("test_tools", settings.test_tools)
        overrides.setdefault("http_port", settings.http_port)
        if "engine_factory" not in overrides:
            locs = settings.locations
            index_lock = IndexLock(locs.index, locs.board, command="memoryd serve", socket=locs.socket)
            factory = find_engine_factory(settings, index_lock)
            overrides["engine_factory"] = factory
            if factory is not None:
                overrides.setdefault("index_lock", index_lock)
        return cls(locations=settings.locations, settings=settings, **overrides)

    def effective(self) -> dict[str, Any]:
        """The values as logged at start-up."""
        out = {
            "version": self.version,
            "socket": str(self.locations.socket),
            "board": str(self.locations.board),
            "index": str(self.locations.index),
            "tool_timeout_ms": round(self.tool_timeout_s * 1000),
            "lock_wait_ms": round(self.lock_wait_s * 1000),
            "test_tools": self.test_tools,
            "http_port": self.http_port,
            "engine": self.engine_factory is not None,
        }
        if self.settings is not None and hasattr(self.settings, "public"):
            out["settings"] = self.settings.public()
        return out


def find_engine_factory(settings: Any, index_lock: IndexLock | None = None) -> EngineFactory | None:
    """``memoryd.core.engine.open_engine(settings, index_lock=index_lock)`` as a factory, or ``None`` when there
    is no engine module yet.

    The module is imported when the factory runs (in the background, after the socket is bound); a module
    without ``open_engine`` then fails the engine slot with a clear error instead of the start-up.
    """
    if importlib.util.find_spec("memoryd.core.engine") is None:
        return None

    async def factory() -> Any:
        # importing the engine pulls in lancedb and numpy (seconds): never on the event loop thread
        module = await asyncio.to_thread(importlib.import_module, "memoryd.core.engine")
        opener = getattr(module, "open_engine", None)
        if opener is None:
            raise StartupError(
                "memoryd.core.engine has no open_engine(settings); the daemon cannot load its engine"
            )
        return await opener(settings, index_lock=index_lock)

    return factory
