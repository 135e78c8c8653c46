"""Every setting once, with its default and help; resolved a single time at start and logged.

Precedence: command-line flag > environment variable > default. ``memoryd status`` and the start-up
log show the effective values (``Settings.public()``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from memoryd.paths import Locations, resolve

DEFAULT_MODEL = "multilingual-e5-small"


def _env_int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    try:
        value = int(env.get(name, default))
    except ValueError:
        return default
    return max(lo, min(hi, value))


@dataclass(frozen=True)
class Settings:
    """Effective configuration of one memoryd process.

    * ``model``: embedding model name, a model directory, or ``"none"`` (keyword-only) — ``MEMORYD_MODEL``
    * ``tool_timeout_ms``: per tool call, 100–600000, default 15000 — ``MEMORYD_TOOL_TIMEOUT_MS``
    * ``log_level``: debug|info|warning|error — ``MEMORYD_LOG_LEVEL``
    * ``optimize_interval_s``: compaction + old-version cleanup period after writes (the bound within
      which deleted text leaves the disk), default 30 — ``MEMORYD_OPTIMIZE_INTERVAL_S``
    * ``debounce_ms``: quiet time per brief before a change on disk is indexed, default 250 —
      ``MEMORYD_DEBOUNCE_MS``
    """

    locations: Locations
    model: str = DEFAULT_MODEL
    tool_timeout_ms: int = 15000
    log_level: str = "info"
    optimize_interval_s: int = 30
    debounce_ms: int = 250

    @classmethod
    def load(
        cls,
        *,
        board: str | None = None,
        index: str | None = None,
        socket: str | None = None,
        model: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Settings:
        env = os.environ if env is None else env
        return cls(
            locations=resolve(board=board, index=index, socket=socket, env=env),
            model=model or env.get("MEMORYD_MODEL") or DEFAULT_MODEL,
            tool_timeout_ms=_env_int(env, "MEMORYD_TOOL_TIMEOUT_MS", 15000, 100, 600_000),
            log_level=(env.get("MEMORYD_LOG_LEVEL") or "info").lower(),
            optimize_interval_s=_env_int(env, "MEMORYD_OPTIMIZE_INTERVAL_S", 30, 1, 3600),
            debounce_ms=_env_int(env, "MEMORYD_DEBOUNCE_MS", 250, 0, 10_000),
        )

    def public(self) -> dict:
        """A JSON-able view for logs and status."""
        out = asdict(self)
        out["locations"] = {k: str(v) for k, v in asdict(self.locations).items()}
        return out
