"""Structured logging: JSON lines on stderr (or a file when run as a service), via structlog.

stdout is never written by the daemon. ``MEMORYD_LOG_LEVEL`` (debug|info|warning|error) sets verbosity.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

import structlog

_configured = False


def configure(level: str | None = None, stream: TextIO | None = None) -> None:
    """Route structlog and stdlib logging to JSON lines on ``stream`` (default stderr). Idempotent."""
    global _configured
    os.environ.setdefault("LANCEDB_LOG", "error")  # LanceDB's plain-text warnings stay out of our logs
    name = (level or os.environ.get("MEMORYD_LOG_LEVEL") or "info").upper()
    numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processor=structlog.processors.JSONRenderer(ensure_ascii=False),
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for noisy in ("watchdog", "mcp", "httpx", "asyncio"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
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


def get_logger(name: str | None = None, **bound: Any) -> structlog.stdlib.BoundLogger:
    """A structlog logger; configures JSON-on-stderr on first use if nobody did."""
    if not _configured:
        configure()
    return structlog.get_logger(name, **bound)
