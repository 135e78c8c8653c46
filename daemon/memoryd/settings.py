"""Every setting once, with its default, range and help; resolved a single time at start and logged.

:data:`VARS` is the one table of the environment variables memoryd reads for its behaviour (ollama's
``envconfig`` style); the locations (``MEMORYD_HOME``, ``MEMORYD_BOARD``, ``MEMORYD_INDEX``,
``MEMORYD_SOCKET``, ``MEMORYD_MODELS``) come from their one rule in :mod:`memoryd.paths`.
Precedence: command-line flag > environment variable > default. An integer outside its range is clamped to
it, except where no nearest value makes sense (a port: refused); a value that is not an integer at all is refused (:class:`SettingsError`, which ``memoryd serve``
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
PORT_MAX = 65535


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
    #: False: a value outside ``lo``..``hi`` is refused instead of clamped (a port has no "nearest" one).
    clamp: bool = True

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
            if not self.clamp and not self.lo <= value <= self.hi:  # type: ignore[operator]
                raise SettingsError(f"{self.env} must be an integer from {self.lo} to {self.hi}, not {raw!r}")
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
        PORT_MAX,
        clamp=False,
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
        """Resolve every setting once. Raises :class:`SettingsError` for an unusable value (an
        ``http_port`` outside 0..65535 included)."""
        env = os.environ if env is None else env
        values = {var.field: var.parse(env.get(var.env)) for var in VARS}
        if model:
            values["model"] = model
        if http_port is not None:
            if not 0 <= http_port <= PORT_MAX:
                raise SettingsError(f"the HTTP port must be from 0 (off) to {PORT_MAX}, not {http_port}")
            values["http_port"] = http_port
        return cls(locations=resolve(board=board, index=index, socket=socket, env=env), **values)

    def public(self) -> dict:
        """A JSON-able view for logs and status."""
        out = asdict(self)
        out["locations"] = {k: str(v) for k, v in asdict(self.locations).items()}
        return out


def port_arg(text: str) -> int:
    """``argparse`` type of a ``--http PORT`` flag: an integer from 0 (off) to :data:`PORT_MAX`. Raises
    ``argparse.ArgumentTypeError`` (a usage error naming the range) for anything else."""
    import argparse

    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or not 0 <= value <= PORT_MAX:
        raise argparse.ArgumentTypeError(f"must be a port from 0 (off) to {PORT_MAX}, not {text!r}")
    return value


def check_env(env: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """What is wrong with the ``MEMORYD_*`` behaviour variables of ``env`` (default ``os.environ``), for
    ``memoryd status`` and ``memoryd doctor``: ``[(variable, "refused" | "clamped", message)]``, in
    :data:`VARS` order. "refused": the value is unusable and a daemon started with it exits 1 (the message
    is :class:`SettingsError`'s); "clamped": an integer outside its range, used as its nearest bound."""
    env = os.environ if env is None else env
    found: list[tuple[str, str, str]] = []
    for var in VARS:
        raw = env.get(var.env)
        try:
            value = var.parse(raw)
        except SettingsError as exc:
            found.append((var.env, "refused", str(exc)))
            continue
        clamped = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and int((raw or "").strip() or value) != value
        )
        if clamped:
            message = f"{var.env}={(raw or '').strip()} is outside {var.lo} to {var.hi}: {value} is used"
            found.append((var.env, "clamped", message))
    return found


def _check_table() -> None:
    names = {f.name for f in fields(Settings)} - {"locations"}
    declared = {v.field for v in VARS}
    if names != declared:  # a field without its variable (or the reverse) is a bug, caught at import
        raise RuntimeError(f"settings fields and VARS differ: {sorted(names ^ declared)}")


_check_table()
