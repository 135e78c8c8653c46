"""``memoryd serve``: start-up -> serve -> shutdown of the one long-running daemon.

One module of ~470 lines on purpose: the start-up and shutdown orders below are the daemon's safety
(locks before the bind, the socket removed before the lock is released), and they read as one sequence.

Entry points (for ``memoryd.cli.main``)::

    run(config: ServeConfig | None = None, *, board=None, index=None, socket=None, model=None,
        engine_factory=None) -> int
        # blocks until SIGTERM/SIGINT; returns the exit code. cli.py's
        # ``run(board=args.board, index=args.index, socket=args.socket, model=args.model)`` works as is:
        # the flags go through ``Settings.load``, the engine through ``memoryd.core.engine.open_engine(settings)``.

    await serve(config: ServeConfig) -> None     # the same inside a running event loop; raises StartupError
    server_status() -> dict                      # the running daemon's facts (pid, sessions, socket...)

Start-up order (watchman/dmypy style, closes the start races): socket dir 0700 -> lock ``<socket>.lock``
-> lock the board directory -> lock the index (``<index>/writer.lock``, :mod:`memoryd.index.lock`: one
writer per index, and an index of another board is refused) -> prove an old socket stale and replace it
-> bind 0600 and listen -> answer handshakes at once -> load the engine in the background (tools report
"warming up" meanwhile).

Under a service manager the socket may be passed in instead (systemd ``LISTEN_FDS``, launchd
``launch_activate_socket``; :func:`memoryd.serve.socketfile.activated`): the locks are still taken, but the
stale-socket check and the bind are skipped and the manager's socket file is never removed, so
connections made while the service restarts wait in its backlog. ``MEMORYD_LOG_FILE`` (set by the plist
and the unit) adds the rotating JSON log (:func:`memoryd.logs.use_service_log`).

With ``http_port`` set (``memoryd serve --http``, ``MEMORYD_HTTP_PORT``) the HTTP listener
(:mod:`memoryd.http`) starts once the socket listens, serving the same ``McpApp`` and tool registry. It is an
extra: when it cannot start (no port, an unusable token file) the daemon logs ``http_failed``, says so on
stderr, and serves the socket alone; ``memoryd status`` shows ``http: null``.

Shutdown on SIGTERM/SIGINT, within :data:`SHUTDOWN_BUDGET_S`: stop accepting (socket and HTTP; HTTP
streams still open are cut after about a second) -> remove the socket (before
releasing the lock, so the next daemon never sees a dead socket it may not replace) -> stop reading, let
in-flight calls finish (up to about a second; answered with their results, since a call may already have
written the board), cancel the rest (answered "memoryd restarted; please retry") and close sessions ->
``engine.close()`` (flushes pending index writes) -> release the locks -> exit 0.
A watchdog forces the exit if a stuck thread would hold the process past the budget.

Exit codes: 0 clean stop, 1 start-up failure, 4 another daemon already serves this socket or board, or
another process writes this index (:mod:`memoryd.errors`). systemd's unit does not restart after 4
(``RestartPreventExitStatus=4``). launchd has no per-status rule (``KeepAlive`` knows only
``SuccessfulExit``, ``Crashed``, ``PathState``, ``OtherJobEnabled``, ``NetworkState``...), so the
LaunchAgent sets :data:`SUPERVISOR_ENV` to ``launchd`` and a daemon refused for that reason exits 0 there:
``KeepAlive`` ``SuccessfulExit`` false then does not restart it every few seconds while the other serves.
Logs are structlog JSON on stderr; stdout is never written.

A person who started it at a terminal (``make run``) gets one plain line on stderr once the engine is
ready (the socket listens and tools answer from the index): ``memoryd ready: board ..., socket ...;
connect your agents with: <memoryd> connect``. stderr, because stdout stays unwritten and it is where
the other plain line (a start-up failure) goes; not under a service (``MEMORYD_LOG_FILE``), whose stderr
file keeps warnings and errors only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memoryd import logs
from memoryd.board.gate import UnsafePath
from memoryd.core.warmup import EngineFactory, EngineHandle
from memoryd.errors import AlreadyRunning, StartupError
from memoryd.index import memory
from memoryd.logs import get_logger
from memoryd.serve import lock, socketfile
from memoryd.serve.config import ServeConfig
from memoryd_shim import rendezvous

# The MCP SDK takes seconds to import, so the modules that need it (listener, mcp_app, tools) are imported
# only after the locks are held and the socket is bound: a daemon that loses the start race exits at once,
# and connections made meanwhile wait in the listen backlog.

__all__ = ["Daemon", "ServeConfig", "run", "serve", "server_status"]

SHUTDOWN_BUDGET_S = 4.5
#: The service manager running this daemon, set by the LaunchAgent plist (``launchd``); see "Exit codes".
SUPERVISOR_ENV = "MEMORYD_SUPERVISOR"

log = get_logger("memoryd.serve.daemon")
_current: Daemon | None = None


class _StopBeforeServing(BaseException):
    """SIGTERM/SIGINT arrived while the socket was bound but the event loop was not serving yet."""


def _stop_before_serving(signum: int, frame: Any) -> None:
    raise _StopBeforeServing(signal.Signals(signum).name)


class Daemon:
    """One serving process: locks, listening socket, listener, engine slot.

    Use :meth:`claim` (sync: locks and bind), then ``await`` :meth:`serve`; :func:`run` does both.
    """

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.pid = os.getpid()
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self.engine = EngineHandle()
        self.engine.process_status = self.status
        self.registry: Any = config.registry
        self.listener: Any = None
        self.http: Any = None  # memoryd.http.listener.HttpListener when serving HTTP
        self._socket_lock = lock.FileLock(config.locations.lock_file)
        self._board_lock = lock.FileLock(config.locations.board, directory=True)
        self._bound: socketfile.BoundSocket | None = None
        self._stop = asyncio.Event()
        self._stopping_since: float | None = None
        self._watchdog: threading.Timer | None = None
        self._clean = False

    # --- start-up ------------------------------------------------------------------------------------

    def claim(self) -> None:
        """Locks, stale-socket replacement, bind. Raises :class:`StartupError` (or a subclass), after
        releasing whatever it took and removing what it made: a refused start (another daemon serves this
        socket or board) leaves no socket lock or folder behind; the running daemon's files are not ours."""
        log.info("starting", pid=self.pid, **self.config.effective())
        made: list[Path] = []  # folders this start created, deepest first
        try:
            self._claim(made)
        except BaseException:
            self.release(remove_socket_lock=True)
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only while empty: anything another process put there stays
            raise

    def _claim(self, made: list[Path]) -> None:
        locs = self.config.locations
        sock_dir = locs.socket.parent
        made[:0] = _missing(sock_dir)
        socketfile.ensure_socket_dir(sock_dir, ours=socketfile.is_memoryd_dir(sock_dir))
        note = f"pid {self.pid}, board {locs.board}"
        wait_s = self.config.lock_wait_s
        lock.acquire(self._socket_lock, locs.socket, what=f"socket {locs.socket}", note=note, wait_s=wait_s)
        made[:0] = _missing(locs.board)
        try:
            locs.board.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StartupError(f"cannot create the board {locs.board}: {exc.strerror or exc}") from exc
        index = locs.index if self.config.index_lock is not None else None
        lock.acquire(
            self._board_lock,
            locs.socket,
            what=f"board {locs.board}",
            wait_s=wait_s,
            holder_of=lambda: lock.board_holder(locs.board, index, locs.socket),
        )
        try:  # who holds the board, for the refusal of the next daemon (memoryd.serve.lock)
            lock.write_board_note(locs.board, socket_path=locs.socket, index=index)
        except (OSError, UnsafePath) as exc:
            log.warning("board_note_failed", board=str(locs.board), error=str(exc))
        if self.config.index_lock is not None:  # one writer per index (memoryd.index.lock)
            self.config.index_lock.acquire(wait_s)
        passed = socketfile.activated()
        if passed is not None:  # launchd/systemd own the socket: no stale check, no bind, never unlinked
            self._bound = passed
            log.info("socket_activated", via=passed.activation, socket=str(passed.path))
            if passed.path != locs.socket:
                log.warning("activated_socket_elsewhere", socket=str(passed.path), expected=str(locs.socket))
            return
        if socketfile.replace_stale(locs.socket):
            log.info("stale_socket_replaced", socket=str(locs.socket))
        self._bound = socketfile.bind(locs.socket)

    def request_stop(self, reason: str) -> None:
        """Begin shutdown (signal handler; idempotent)."""
        if self._stopping_since is not None:
            log.info("stop_already_requested", reason=reason)
            return
        self._stopping_since = time.monotonic()
        log.info("stopping", reason=reason)
        self._stop.set()
        # A thread stuck in native code (model load, index write) must not keep us past the budget.
        self._watchdog = threading.Timer(SHUTDOWN_BUDGET_S + 0.4, self._force_exit)
        self._watchdog.daemon = True
        self._watchdog.start()

    def cancel_watchdog(self) -> None:
        """Call once the event loop has fully ended (``asyncio.run`` also joins executor threads)."""
        if self._watchdog is not None:
            self._watchdog.cancel()

    def _force_exit(self) -> None:
        log.error("shutdown_overran", budget_s=SHUTDOWN_BUDGET_S, clean=self._clean)
        self.remove_socket()
        os._exit(0 if self._clean else 1)

    def _build(self) -> None:
        """Import and wire the MCP side (slow: the SDK)."""
        from memoryd.serve.app import McpApp
        from memoryd.serve.listener import Listener
        from memoryd.tools import build_registry

        if self.registry is None:
            # the schemas are constants the tests check; checking them here delays the first answer
            self.registry = build_registry(self.config.test_tools, check_schemas=False)
        app = McpApp(
            version=self.config.version,
            engine=self.engine,
            tool_timeout_s=self.config.tool_timeout_s,
            instructions=self.config.instructions,
        )
        self.listener = Listener(
            app,
            self.registry,
            version=self.config.version,
            status=self.full_status,
            board=str(self.config.locations.board),
        )
        if self.config.http_port:
            from memoryd.http.listener import for_daemon

            self.http = for_daemon(
                app, self.registry, self.engine, self.config.http_port, self.config.locations.socket.parent
            )

    async def _start_http(self) -> None:
        """Start the HTTP listener; a failure leaves the daemon serving the socket alone (module docstring)."""
        try:
            await self.http.start()
        except Exception as exc:
            log.error("http_failed", port=self.config.http_port, reason=f"{type(exc).__name__}: {exc}")
            print(
                f"memoryd: not serving HTTP on port {self.config.http_port}: {exc} (the socket is served)",
                file=sys.stderr,
                flush=True,
            )
            self.http = None

    async def serve(self) -> None:
        """Serve on the claimed socket until SIGTERM/SIGINT, then shut down; releases the locks."""
        global _current
        if self._bound is None:
            raise RuntimeError("Daemon.claim() must succeed before serve()")
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop, signal.Signals(signum).name)
        _current = self
        try:
            self._build()
            extra: dict[str, Any] = {}
            if self._bound.activation and sys.version_info >= (3, 13):
                extra["cleanup_socket"] = False  # the manager's socket file outlives this daemon
            aserver = await asyncio.start_unix_server(
                self.listener.handle, sock=self._bound.sock, limit=rendezvous.MAX_LINE_BYTES, **extra
            )
            log.info("listening", socket=str(self._bound.path), groups=self.registry.groups)
            self.engine.start(self.config.engine_factory)  # loads in the background; status says "loading"
            if self.http is not None:
                await self._start_http()
            announce = loop.create_task(self._announce_ready(), name="memoryd-ready-line")
            await self._stop.wait()
            announce.cancel()
            await self._shutdown(aserver)
        finally:
            _current = None
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            if not self._clean:
                self.remove_socket()  # an error or cancellation ended serving: leave no stale socket
                if self.http is not None:
                    self.http.forget_port()
            self.release()

    async def _announce_ready(self) -> None:
        """The one plain line for a person at a terminal (module docstring), once the engine is ready."""
        if self.config.engine_factory is None or logs.log_file_path() is not None:
            return
        if await self.engine.loaded() != "ready":
            return  # the engine_failed log line says why
        from memoryd.paths import memoryd_command

        locs = self.config.locations
        http = f", HTTP {self.http.url} (`{memoryd_command()} open` shows the page)" if self.http else ""
        print(
            f"memoryd ready: board {locs.board}, socket {self._bound.path}{http}; "
            f"connect your agents with: {memoryd_command()} connect",
            file=sys.stderr,
            flush=True,
        )

    async def _shutdown(self, aserver: asyncio.Server) -> None:
        deadline = (self._stopping_since or time.monotonic()) + SHUTDOWN_BUDGET_S
        aserver.close()  # stop accepting; live connections are ours to end below
        removed = self.remove_socket()
        if self.http is not None:
            await self.http.stop(timeout=min(1.5, max(0.1, deadline - time.monotonic() - 2.0)))
        await self.listener.close_all(timeout=min(2.5, max(0.1, deadline - time.monotonic() - 1.0)))
        await self.engine.close(timeout=max(0.1, deadline - time.monotonic() - 0.2))
        self._clean = True
        log.info("stopped", socket_removed=removed, uptime_s=round(time.monotonic() - self._t0, 3))

    def remove_socket(self) -> bool:
        """Unlink our socket file if it is still ours (idempotent); ``True`` when removed now."""
        return self._bound.remove_file() if self._bound is not None else False

    def release(self, *, remove_socket_lock: bool = False) -> None:
        """Release the locks (idempotent); the socket file must already be gone. ``remove_socket_lock``
        (a start that never served) deletes ``<socket>.lock`` too when this process holds it."""
        if self.config.index_lock is not None:
            self.config.index_lock.release()
        if self._board_lock.held:
            lock.remove_board_note(self.config.locations.board)
        self._board_lock.release()
        self._socket_lock.release(remove=remove_socket_lock)

    # --- status --------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Process-level facts: ``{"running", "pid", "version", "started_at", "uptime_s", "sessions",
        "socket": {"path","exists","mode","owner_uid","owner"}, "wire", "activation", "log_file",
        "stderr_file", "board", "index", "tool_groups", "tool_timeout_ms", "engine_state"}``. ``wire`` is the
        wire version, ``activation`` ``"systemd"``/``"launchd"`` when the service manager passed the socket in
        (else ``None``), ``log_file`` the rotating JSON log when run as a service (else ``None``),
        ``stderr_file`` the file its stderr goes to (started by a shim: ``<state>/memoryd-spawned.log``;
        ``None``: a terminal, a pipe, the journal), ``http``
        ``{"url", "port", "sessions"}`` while serving HTTP (else ``None``). Times are
        seconds; ``started_at`` is ISO-8601 UTC."""
        locs = self.config.locations
        return {
            "running": True,
            "pid": self.pid,
            "version": self.config.version,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "uptime_s": round(time.monotonic() - self._t0, 3),
            "sessions": len(self.listener.sessions) if self.listener else 0,
            "socket": socketfile.describe(locs.socket),
            "wire": rendezvous.WIRE_VERSION,
            "activation": self._bound.activation if self._bound is not None else None,
            "log_file": logs.log_file_path(),
            "stderr_file": logs.stderr_file(rendezvous.spawn_log_path_str()),
            "board": str(locs.board),
            "index": str(locs.index),
            "tool_groups": self.registry.groups if self.registry else [],
            "tool_timeout_ms": round(self.config.tool_timeout_s * 1000),
            "engine_state": self.engine.state,
            "http": self._http_status(),
        }

    def _http_status(self) -> dict[str, Any] | None:
        """``{"url", "port", "sessions"}`` while serving HTTP, else ``None``."""
        if self.http is None or self.http.port is None:
            return None
        return {"url": self.http.url, "port": self.http.port, "sessions": self.http.sessions()}

    async def full_status(self) -> dict[str, Any]:
        """:meth:`status` plus ``"engine"``: the engine slot state merged with ``engine.status()``."""
        return {**self.status(), "engine": await self.engine.status()}


def server_status() -> dict[str, Any]:
    """The running daemon's :meth:`Daemon.status` (in-process), or ``{"running": False}``."""
    return _current.status() if _current is not None else {"running": False}


async def serve(config: ServeConfig) -> None:
    """Serve until SIGTERM/SIGINT inside the running event loop. Raises :class:`StartupError`."""
    daemon = Daemon(config)
    daemon.claim()
    try:
        await daemon.serve()
    finally:
        daemon.cancel_watchdog()


def run(
    config: ServeConfig | None = None,
    *,
    board: str | None = None,
    index: str | None = None,
    socket: str | None = None,
    model: str | None = None,
    http_port: int | None = None,
    engine_factory: EngineFactory | None = None,
) -> int:
    """Blocking entry point for ``memoryd serve``; returns the process exit code.

    Pass a ready :class:`ServeConfig`, or the ``memoryd serve`` flags (``board``, ``index``, ``socket``,
    ``model``, ``http_port``; ``None`` = default), which go through ``Settings.load`` and, unless ``engine_factory`` is
    given, ``memoryd.core.engine.open_engine(settings)``.
    """
    logs.use_service_log()  # MEMORYD_LOG_FILE (set by the LaunchAgent/systemd unit): rotating JSON log too
    memory.limit_arenas()  # before the model, LanceDB and the event loop start their threads
    memory.map_large_blocks()
    memory.system_arrow_pool()  # before LanceDB imports pyarrow
    _raise_fd_limit()
    try:
        if config is None:
            from memoryd.settings import Settings

            settings = Settings.load(
                board=board, index=index, socket=socket, model=model, http_port=http_port
            )
            extra = {} if engine_factory is None else {"engine_factory": engine_factory}
            config = ServeConfig.from_settings(settings, **extra)
        daemon = Daemon(config)
        daemon.claim()
    except StartupError as exc:
        advice = ""
        if isinstance(exc, AlreadyRunning) and config is not None:
            from memoryd.paths import memoryd_command
            from memoryd.serve.control import already_running_advice

            advice = already_running_advice(config.locations.socket, config.http_port, memoryd_command())
        return _startup_failed(exc, advice)
    # Until the event loop installs its own handlers, a stop signal unwinds through serve()'s cleanup.
    previous = {sig: signal.signal(sig, _stop_before_serving) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        asyncio.run(daemon.serve())
    except _StopBeforeServing as stop:
        log.info("stopped_before_serving", reason=str(stop))
    except Exception as exc:
        log.error("crashed", exc_info=exc)
        print(
            f"memoryd: crashed: {type(exc).__name__}: {exc} (see the log above)", file=sys.stderr, flush=True
        )
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        daemon.remove_socket()
        daemon.release()
        daemon.cancel_watchdog()
    return 0


def _missing(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first (what ``mkdir(parents=True)``
    would create)."""
    out: list[Path] = []
    while not os.path.lexists(folder) and folder.parent != folder:
        out.append(folder)
        folder = folder.parent
    return out


def _raise_fd_limit() -> None:
    """The soft ``RLIMIT_NOFILE`` up to the hard one (often 1024 of far more): connections, the index
    and the model all hold descriptors. macOS refuses an unlimited soft limit, hence its OPEN_MAX."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = resource.RLIM_INFINITY
    for target in (1 << 20, 10240) if hard == unlimited else (hard, min(hard, 10240)):
        if soft == unlimited or soft >= target:
            return
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        log.debug("fd_limit_raised", soft=soft, now=target, hard=hard)
        return


def _startup_failed(exc: StartupError, advice: str = "") -> int:
    """Log and say why the daemon does not start (``advice``: what to do about a daemon already running)."""
    reason = f"{exc}; {advice}" if advice else str(exc)
    if isinstance(exc, AlreadyRunning) and os.environ.get(SUPERVISOR_ENV) == "launchd":
        # launchd would restart an exit 4 (see "Exit codes"); the daemon that already serves stays.
        log.warning("startup_refused", reason=reason, exit_code=0, supervisor="launchd")
        print(f"memoryd: {reason} (exit 0, so that launchd does not restart it)", file=sys.stderr, flush=True)
        return 0
    # One plain line for a person at a terminal (`make run`, `memoryd serve` typed by hand): the JSON line
    # would only repeat it there. A service, a shim or a pipe keeps the JSON line for machines. Never stdout.
    by_hand = sys.stderr.isatty() and not os.environ.get(SUPERVISOR_ENV) and logs.log_file_path() is None
    if not by_hand:
        log.error("startup_failed", reason=reason, exit_code=exc.exit_code)
    print(f"memoryd: {reason}", file=sys.stderr, flush=True)
    return exc.exit_code
