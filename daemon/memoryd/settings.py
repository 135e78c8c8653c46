"""Every setting once, with its default, range and help; resolved a single time at start and logged.

:data:`VARS` is the one table of the environment variables memoryd reads for its behaviour (ollama's
``envconfig`` style); the locations (``MEMORYD_HOME``, ``MEMORYD_BOARD``, ``MEMORYD_INDEX``,
``MEMORYD_SOCKET``, ``MEMORYD_MODELS``) come from their one rule in :mod:`memoryd.paths`.
Precedence: command-line flag > environment variable > default. An integer outside its range is clamped to
it; a value that is not an integer at all is refused (:class:`SettingsError`, which ``memoryd serve``
reports and exits 1 on). ``memoryd status`` and the start-up log show the effective values
(:meth:`Settings.public`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from memoryd.errors import StartupError
from memoryd.paths import Locations, resolve

DEFAULT_MODEL = "multilingual-e5-small"
LOG_LEVELS = ("debug", "info", "warning", "error")


class SettingsError(StartupError):
    """An environment variable holds a value memoryd cannot use; the message names it and its range."""


@dataclass(frozen=True)
class Var:
    """One environment variable: the :class:`Settings` field it sets, its default, range and help."""

    env: str
    field: str
    default: int | str | bool
    help: str
    lo: int | None = None
    hi: int | None = None
    choices: tuple[str, ...] = ()

    def parse(self, raw: str | None) -> int | str | bool:
        """The value of ``raw`` (None or "": the default). Raises :class:`SettingsError`."""
        if raw is None or raw.strip() == "":
            return self.default
        if isinstance(self.default, bool):
            return raw.strip() == "1"
        if isinstance(self.default, int):
            try:
                value = int(raw.strip())
            except ValueError:
                raise SettingsError(
                    f"{self.env} must be an integer from {self.lo} to {self.hi}, not {raw!r}"
                ) from None
            return max(
                self.lo if self.lo is not None else value,
                min(self.hi if self.hi is not None else value, value),
            )
        value = raw.strip()
        if self.choices and value.lower() not in self.choices:
            raise SettingsError(f"{self.env} must be one of {', '.join(self.choices)}, not {raw!r}")
        return value.lower() if self.choices else value


#: Every behaviour setting, in the order ``memoryd status`` and the README list them.
VARS: tuple[Var, ...] = (
    Var(
        "MEMORYD_MODEL",
        "model",
        DEFAULT_MODEL,
        "embedding model name, a model folder, or 'none' (keyword-only)",
    ),
    Var("MEMORYD_TOOL_TIMEOUT_MS", "tool_timeout_ms", 15_000, "time budget of one tool call", 100, 600_000),
    Var(
        "MEMORYD_LOG_LEVEL", "log_level", "info", "JSON log lines on stderr at this level", choices=LOG_LEVELS
    ),
    Var(
        "MEMORYD_OPTIMIZE_INTERVAL_S",
        "optimize_interval_s",
        30,
        "index compaction and old-version cleanup after writes (the bound within which deleted text leaves the disk)",
        1,
        3600,
    ),
    Var(
        "MEMORYD_DEBOUNCE_MS", "debounce_ms", 250, "quiet time before a change on disk is indexed", 0, 10_000
    ),
    Var(
        "MEMORYD_LOCK_WAIT_MS",
        "lock_wait_ms",
        8000,
        "how long a new daemon waits for a lock whose holder is starting or stopping",
        1,
        600_000,
    ),
    Var(
        "MEMORYD_HTTP_PORT",
        "http_port",
        0,
        "also serve MCP Streamable HTTP and the page on 127.0.0.1 and ::1 at this port (0: off; "
        "`memoryd serve --http` alone means 7077)",
        0,
        65535,
    ),
    Var("MEMORYD_TEST_TOOLS", "test_tools", False, "1 adds the test-only _diagnostics tools (tests only)"),
)


@dataclass(frozen=True)
class Settings:
    """Effective configuration of one memoryd process: the locations and one field per :data:`VARS` entry."""

    locations: Locations
    model: str = DEFAULT_MODEL
    tool_timeout_ms: int = 15_000
    log_level: str = "info"
    optimize_interval_s: int = 30
    debounce_ms: int = 250
    lock_wait_ms: int = 8000
    http_port: int = 0
    test_tools: bool = False

    @classmethod
    def load(
        cls,
        *,
        board: str | None = None,
        index: str | None = None,
        socket: str | None = None,
        model: str | None = None,
        http_port: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Settings:
        """Resolve every setting once. Raises :class:`SettingsError` for an unusable value."""
        env = os.environ if env is None else env
        values = {var.field: var.parse(env.get(var.env)) for var in VARS}
        if model:
            values["model"] = model
        if http_port is not None:
            values["http_port"] = max(0, min(65535, http_port))
        return cls(locations=resolve(board=board, index=index, socket=socket, env=env), **values)

    def public(self) -> dict:
        """A JSON-able view for logs and status."""
        out = asdict(self)
        out["locations"] = {k: str(v) for k, v in asdict(self.locations).items()}
        return out


def _check_table() -> None:
    names = {f.name for f in fields(Settings)} - {"locations"}
    declared = {v.field for v in VARS}
    if names != declared:  # a field without its variable (or the reverse) is a bug, caught at import
        raise RuntimeError(f"settings fields and VARS differ: {sorted(names ^ declared)}")


_check_table()
