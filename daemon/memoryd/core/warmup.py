"""The process-level engine slot: the daemon answers MCP handshakes at once and loads the engine behind them.

States: ``disabled`` (no engine configured) -> or ``loading`` -> ``ready`` | ``failed``. Tools ask for the
engine through :meth:`EngineHandle.get` (via ``ToolContext.engine()``, which waits up to the call's
remaining time budget), which waits a bounded time and then raises :class:`~memoryd.errors.WarmingUp` with a message the model can act on ("retry in a few
seconds"), so ``initialize`` and ``tools/list`` never wait for the index or the model (Codex allows a
server 10 s from spawn to ``tools/list``).

The engine factory is an ``async`` callable returning the engine (:class:`memoryd.core.engine.Engine`:
``status() -> dict`` and ``close()``, sync or async). Blocking work inside
it belongs in a thread (``anyio.to_thread.run_sync``) so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from memoryd.errors import EngineUnavailable, WarmingUp
from memoryd.logs import get_logger

EngineFactory = Callable[[], Awaitable[Any]]

log = get_logger("memoryd.core.warmup")


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class EngineHandle:
    """Owns the engine for the whole process (one per daemon, shared by every session)."""

    def __init__(self) -> None:
        self.state = "disabled"
        self.engine: Any = None
        self.error: str | None = None
        self._since = time.monotonic()
        self._ready = asyncio.Event()
        self._task: asyncio.Task | None = None
        #: The serving process's own status (version, uptime, sessions), set by the daemon that owns this
        #: handle; ``healthcheck`` reads it without importing the serving layer.
        self.process_status: Callable[[], dict[str, Any]] = lambda: {"running": False}

    def start(self, factory: EngineFactory | None) -> None:
        """Begin loading in the background (no-op without a factory). Call from the event loop."""
        if factory is None:
            return
        self.state = "loading"
        self._since = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._load(factory), name="memoryd-engine-load")

    async def _load(self, factory: EngineFactory) -> None:
        try:
            engine = await factory()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.state, self.error = "failed", f"{type(exc).__name__}: {exc}"
            log.error("engine_failed", error=self.error, exc_info=exc)
        else:
            self.engine, self.state = engine, "ready"
            log.info("engine_ready", load_s=round(time.monotonic() - self._since, 3))
        finally:
            self._ready.set()

    async def loaded(self) -> str:
        """Wait until loading has ended (never returns while no factory was started); the state then:
        ``"ready"`` or ``"failed"``."""
        await self._ready.wait()
        return self.state

    async def get(self, wait_s: float = 0.0) -> Any:
        """The engine; waits up to ``wait_s`` seconds while it loads. Raises ``WarmingUp``/``EngineUnavailable``."""
        if self.state == "loading" and wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), timeout=wait_s)
        if self.state == "ready":
            return self.engine
        if self.state == "loading":
            loading_s = time.monotonic() - self._since
            raise WarmingUp(
                f"memoryd is still loading its index ({loading_s:.0f} s so far); this call waited "
                f"{max(wait_s, 0.0):.1f} s, all its time budget allows. Try again in a few seconds."
            )
        if self.state == "failed":
            raise EngineUnavailable(f"memoryd could not load its index: {self.error}. Check the daemon log.")
        raise EngineUnavailable("this memoryd daemon runs without an engine (no index or board configured)")

    async def status(self) -> dict[str, Any]:
        """``{"state", "since_s", "error"?}`` plus the engine's own ``status()`` when ready."""
        out: dict[str, Any] = {"state": self.state, "since_s": round(time.monotonic() - self._since, 3)}
        if self.error:
            out["error"] = self.error
        if self.state == "ready" and hasattr(self.engine, "status"):
            try:
                out.update(await _maybe_await(self.engine.status()))
            except Exception as exc:
                out["status_error"] = f"{type(exc).__name__}: {exc}"
        return out

    async def close(self, timeout: float) -> None:
        """Stop loading, or ``engine.close()`` (flushes pending index writes), within ``timeout`` seconds."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=timeout)
        if self.state != "ready" or self.engine is None:
            return
        close = getattr(self.engine, "close", None)
        if close is None:
            return
        try:
            if inspect.iscoroutinefunction(close):
                await asyncio.wait_for(close(), timeout=timeout)
            else:
                await asyncio.wait_for(asyncio.to_thread(close), timeout=timeout)
        except TimeoutError:
            log.error("engine_close_timeout", timeout_s=timeout)
        except Exception as exc:
            log.error("engine_close_failed", exc_info=exc)
        finally:
            self.state = "closed"
