"""Structured logging: JSON lines on stderr, plus a rotating file when run as a service, via structlog.

stdout is never written by the daemon. ``MEMORYD_LOG_LEVEL`` (debug|info|warning|error) sets verbosity.
structlog is used through :func:`get_logger` only, which configures this before its first logger: structlog's
own default prints to stdout, where the shim's and the hooks' protocol runs. The stderr handler writes to
``sys.stderr`` as it is at each line, not as it was when logging was configured: a stream swapped in
meanwhile and closed since (a test runner's capture) would otherwise turn every later line into a
"--- Logging error ---" report carrying the event.

Run as a service (the LaunchAgent plist and the systemd unit set ``MEMORYD_LOG_FILE=<logs>/memoryd.log``),
``memoryd serve`` calls :func:`use_service_log`: every JSON line goes to that file, rotated by
:class:`logging.handlers.RotatingFileHandler` at :data:`MAX_LOG_BYTES` with :data:`BACKUP_COUNT` older
files kept (``memoryd.log.1`` ...), while stderr keeps warnings and errors only, so crashes still land in
the service manager's stderr file (launchd's ``StandardErrorPath``, systemd's journal) without the
routine lines filling an unrotated file.

asyncio's "socket.accept() out of system resource" (the process is out of file descriptors) is logged
for every accept it retries, up to a hundred a millisecond; :class:`AcceptErrorThrottle` keeps one a
minute, saying how many it dropped.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import structlog

LOG_FILE_ENV = "MEMORYD_LOG_FILE"
MAX_LOG_BYTES = 10 * 1024 * 1024
BACKUP_COUNT = 3

_configured = False
_log_file: Path | None = None


def configure(
    level: str | None = None,
    stream: TextIO | None = None,
    log_file: str | os.PathLike[str] | None = None,
    plain: str | None = None,
) -> None:
    """Route structlog and stdlib logging to JSON lines on ``stream`` (default: ``sys.stderr`` at each
    line) and, with ``log_file``, to that rotating file as well (stderr then keeps warnings and errors only).
    ``plain``: a command's name (``"memoryd tasks"``): stream lines are sentences it starts instead of JSON
    (:class:`Sentence`). Idempotent; raises ``OSError`` when ``log_file`` cannot be opened."""
    global _configured, _log_file
    os.environ.setdefault("LANCEDB_LOG", "error")  # LanceDB's plain-text warnings stay out of our logs
    name = (level or os.environ.get("MEMORYD_LOG_LEVEL") or "info").upper()
    numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
    formatter = structlog.stdlib.ProcessorFormatter(
        processor=structlog.processors.JSONRenderer(ensure_ascii=False),
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
    )
    handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
    handler.setFormatter(
        formatter
        if plain is None
        else structlog.stdlib.ProcessorFormatter(
            processor=Sentence(plain), foreign_pre_chain=[structlog.stdlib.add_log_level]
        )
    )
    handler.addFilter(_hush)
    handlers: list[logging.Handler] = [handler]
    if log_file is not None:
        path = Path(log_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        rotating = logging.handlers.RotatingFileHandler(
            path, maxBytes=MAX_LOG_BYTES, backupCount=BACKUP_COUNT, encoding="utf-8"
        )
        rotating.setFormatter(formatter)
        handlers.append(rotating)
        handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    for old in root.handlers:
        if isinstance(old, logging.FileHandler):
            old.close()
    root.handlers[:] = handlers
    _log_file = Path(log_file) if log_file is not None else None
    root.setLevel(numeric)
    for noisy in ("watchdog", "mcp", "httpx", "asyncio"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    aio = logging.getLogger("asyncio")
    if not any(isinstance(f, AcceptErrorThrottle) for f in aio.filters):
        aio.addFilter(AcceptErrorThrottle())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=False,
    )
    _configured = True


class Sentence:
    """Renders a log line for a person at a terminal: ``memoryd tasks: skipped tasks/x.json: bad JSON``.

    A command's warnings are about what it just did, so the time, the logger and the board are left out;
    an ``*_skipped`` event with a ``path`` and a ``reason`` reads "skipped <path>: <reason>", any other
    "<event in words> (<key> <value>, ...)"; an error says so first, and an exception adds its last line."""

    def __init__(self, prog: str) -> None:
        self.prog = prog

    def __call__(self, _logger: Any, _name: str, event_dict: Mapping[str, Any]) -> str:
        ev = {k: v for k, v in event_dict.items() if k not in ("logger", "timestamp", "board", "_record")}
        ev.pop("_from_structlog", None)
        level = str(ev.pop("level", ""))
        words = str(ev.pop("event", "")).rsplit(".", 1)[-1].replace("_", " ")
        exc = ev.pop("exception", None) or ev.pop("exc_info", None)
        if words.endswith("skipped") and "path" in ev and "reason" in ev:
            text = f"skipped {ev.pop('path')}: {ev.pop('reason')}"
        else:
            text = words
        if ev:
            text += " (" + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in ev.items()) + ")"
        if isinstance(exc, str) and exc.strip():
            text += f": {exc.strip().splitlines()[-1]}"
        return f"{self.prog}: {'error: ' if level in ('error', 'critical') else ''}{text}"


_hushed: set[str] = set()


def _hush(record: logging.LogRecord) -> bool:
    """The stream handler's filter: False for an event :func:`hush` silenced."""
    return not (isinstance(record.msg, dict) and record.msg.get("event") in _hushed)


def hush(*events: str) -> None:
    """Stop writing these events on stderr (a command whose output lists what they say); the log file, when
    there is one, keeps them."""
    _hushed.update(events)


class _Stderr(logging.StreamHandler):
    """A stream handler on whatever ``sys.stderr`` is when a line is written (module docstring)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current sys.stderr


class AcceptErrorThrottle(logging.Filter):
    """Passes one asyncio "out of system resource" accept error per ``every_s`` seconds; the one that
    passes says how many were dropped before it. Other records pass untouched."""

    PREFIX = "socket.accept() out of system resource"

    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self.every_s = every_s
        self.dropped = 0
        self._passed_at: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(self.PREFIX)):
            return True
        now = time.monotonic()
        if self._passed_at is not None and now - self._passed_at < self.every_s:
            self.dropped += 1
            return False
        self._passed_at = now
        if self.dropped:
            record.msg = f"{record.getMessage()}\n({self.dropped} more dropped since the last one)"
            record.args = None
            self.dropped = 0
        return True


def get_logger(name: str | None = None, **bound: Any) -> structlog.stdlib.BoundLogger:
    """A structlog logger; configures JSON-on-stderr on first use if nobody did."""
    if not _configured:
        configure()
    return structlog.get_logger(name, **bound)


def use_service_log(env: Mapping[str, str] | None = None) -> Path | None:
    """When ``MEMORYD_LOG_FILE`` is set (by the service definitions), add the rotating JSON log there.

    Returns the log file, or ``None`` when not run as a service or the file cannot be opened (logged as a
    warning on stderr; the daemon still runs).
    """
    env = os.environ if env is None else env
    value = env.get(LOG_FILE_ENV)
    if not value:
        return None
    path = Path(value).expanduser().absolute()
    try:
        configure(log_file=path)
    except OSError as exc:
        configure()
        get_logger("memoryd.logs").warning("log_file_unavailable", path=str(path), error=str(exc))
        return None
    return path


def log_file_path() -> str | None:
    """The rotating log file in use, or ``None`` (stderr only)."""
    return str(_log_file) if _log_file is not None else None


def stderr_file(known: str) -> str | None:
    """Where this process's stderr is written when that is a file: ``known`` (the path a shim that started
    the daemon appends its stderr to) when stderr is that very file, else the file's path as Linux's
    ``/proc`` names it; ``None`` for a terminal, a pipe or the service manager's journal."""
    try:
        mine = os.fstat(2)
    except OSError:
        return None
    if not stat.S_ISREG(mine.st_mode):
        return None
    with contextlib.suppress(OSError):
        if os.path.samestat(mine, os.stat(known)):
            return known
    try:
        return os.readlink("/proc/self/fd/2")
    except OSError:
        return None
