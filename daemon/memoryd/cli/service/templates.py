"""The LaunchAgent plist and the systemd units: find the templates, fill them, validate the result.

One copy of each template lives in the checkout's ``launchd/`` folder; the wheel ships the same folder as
``memoryd/_service_templates`` (hatch ``force-include``). :func:`template_dir` finds either, so an
installed wheel, an editable install and a plain checkout render the same files.

Templates use :class:`string.Template` placeholders (``${python}``...). Every value is escaped for its
format here (XML text for the plist; systemd's quoting, ``%`` specifiers and ``$`` expansion for units),
and every path is absolute: launchd and systemd run services with ``PATH=/usr/bin:/bin:/usr/sbin:/sbin``
and no shell profile.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import string
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import memoryd
from memoryd.cli.service.common import LABEL, MARKER, UNIT, ServiceError
from memoryd.paths import Locations, resolve

PLIST_TEMPLATE = f"{LABEL}.plist"
SERVICE_TEMPLATE = f"{UNIT}.service"
SOCKET_TEMPLATE = f"{UNIT}.socket"
#: Environment variable the service definitions set so the daemon also writes its rotating JSON log.
LOG_FILE_ENV = "MEMORYD_LOG_FILE"
#: Set to ``launchd`` by the plist (the same name as ``memoryd.serve.daemon.SUPERVISOR_ENV``): a daemon refused
#: because another one already serves exits 0 there, since ``KeepAlive`` cannot skip exit status 4.
SUPERVISOR_ENV = "MEMORYD_SUPERVISOR"
#: Name of the service manager's stdout/stderr file (launchd) under the logs folder: crashes land here.
STDERR_NAME = "memoryd.stderr.log"
#: Set by the definitions when the service should also serve HTTP (:mod:`memoryd.http`).
HTTP_PORT_ENV = "MEMORYD_HTTP_PORT"
#: The optional variables: in the definitions only when set.
OPTIONAL_ENV = ("MEMORYD_HOME", HTTP_PORT_ENV)


def template_dir() -> Path:
    """The folder holding the templates: ``memoryd/_service_templates`` in an installed wheel, else the
    checkout's ``launchd/`` (editable install or source tree). Raises :class:`ServiceError` if neither."""
    package = Path(memoryd.__file__).parent
    for candidate in (package / "_service_templates", package.parent.parent / "launchd"):
        if (candidate / PLIST_TEMPLATE).is_file():
            return candidate
    raise ServiceError(
        f"the service templates are missing (looked in {package / '_service_templates'} and "
        f"{package.parent.parent / 'launchd'}); reinstall memoryd"
    )


@dataclass(frozen=True)
class Context:
    """What a rendered service definition needs.

    ``python`` is the absolute interpreter path running this memoryd (``sys.executable`` as given, not
    resolved: a virtual environment's ``bin/python`` symlink is what finds its packages). ``home`` is
    ``MEMORYD_HOME`` when set at install time (passed on so every derived location matches).
    ``http_port`` (``memoryd service install --http [PORT]``, or ``MEMORYD_HTTP_PORT`` at install time)
    turns the daemon's HTTP listener on in the service: the definitions then set ``MEMORYD_HTTP_PORT``.
    """

    python: str
    locations: Locations
    platform: str  # "darwin" or "linux": picks the UTF-8 locale name
    home: str | None = None
    http_port: int = 0

    @classmethod
    def current(
        cls, env: Mapping[str, str] | None = None, platform: str | None = None, http_port: int | None = None
    ) -> Context:
        env = os.environ if env is None else env
        if http_port is None:
            from memoryd.settings import VARS

            var = next(v for v in VARS if v.env == HTTP_PORT_ENV)
            try:
                http_port = int(var.parse(env.get(HTTP_PORT_ENV)))
            except ValueError as exc:
                raise ServiceError(str(exc)) from exc
        python = sys.executable
        if not python or not os.path.isabs(python):
            raise ServiceError(f"cannot tell this interpreter's absolute path ({python!r})")
        home = env.get("MEMORYD_HOME")
        return cls(
            python=python,
            locations=resolve(env=env),
            platform=platform or sys.platform,
            home=os.path.abspath(os.path.expanduser(home)) if home else None,
            http_port=http_port,
        )

    @property
    def locale(self) -> str:
        # macOS ships en_US.UTF-8 but no C.UTF-8; glibc has had C.UTF-8 built in since 2.35
        return "en_US.UTF-8" if self.platform == "darwin" else "C.UTF-8"

    @property
    def log_file(self) -> Path:
        return self.locations.log_file

    @property
    def stderr_file(self) -> Path:
        return self.locations.logs / STDERR_NAME

    def environment(self) -> dict[str, str]:
        """The memoryd variables every service definition sets (absolute paths)."""
        locs = self.locations
        out = {
            "MEMORYD_BOARD": str(locs.board),
            "MEMORYD_INDEX": str(locs.index),
            "MEMORYD_MODELS": str(locs.models),
            "MEMORYD_SOCKET": str(locs.socket),
            LOG_FILE_ENV: str(self.log_file),
        }
        if self.home:
            out["MEMORYD_HOME"] = self.home
        if self.http_port:
            out[HTTP_PORT_ENV] = str(self.http_port)
        return out


def _fill(name: str, values: Mapping[str, str]) -> str:
    text = (template_dir() / name).read_text(encoding="utf-8")
    try:
        return string.Template(text).substitute(values)
    except (KeyError, ValueError) as exc:
        raise ServiceError(f"the template {name} has an unknown placeholder: {exc}") from exc


# --- launchd ------------------------------------------------------------------------------------------


def render_plist(ctx: Context) -> str:
    """The LaunchAgent plist text for ``ctx`` (validated with :func:`validate_plist` before use)."""
    env = ctx.environment()
    extra = "".join(
        f"\t\t<key>{escape(k)}</key>\n\t\t<string>{escape(v)}</string>\n"
        for k, v in env.items()
        if k in OPTIONAL_ENV
    )
    values = {
        "marker": escape(MARKER),
        "label": LABEL,
        "python": escape(ctx.python),
        "locale": ctx.locale,
        "board": escape(env["MEMORYD_BOARD"]),
        "index": escape(env["MEMORYD_INDEX"]),
        "models": escape(env["MEMORYD_MODELS"]),
        "socket": escape(env["MEMORYD_SOCKET"]),
        "log_file": escape(env[LOG_FILE_ENV]),
        "stderr_file": escape(str(ctx.stderr_file)),
        "extra_env": extra,
    }
    return _fill(PLIST_TEMPLATE, values)


def validate_plist(text: str, ctx: Context) -> dict:
    """Parse the rendered plist with :mod:`plistlib`, write it back and parse again (a round trip), and
    check what launchd needs: the label, absolute program path, the socket. Returns the parsed dict;
    raises :class:`ServiceError` naming the problem."""
    try:
        parsed = plistlib.loads(text.encode("utf-8"))
        again = plistlib.loads(plistlib.dumps(parsed, fmt=plistlib.FMT_XML))
    except Exception as exc:  # plistlib raises InvalidFileException, ExpatError, ValueError...
        raise ServiceError(f"the rendered LaunchAgent plist does not parse: {exc}") from exc
    if again != parsed:
        raise ServiceError("the rendered LaunchAgent plist does not survive a plistlib round trip")
    problems = []
    if parsed.get("Label") != LABEL:
        problems.append(f"Label is {parsed.get('Label')!r}, not {LABEL!r}")
    program = (parsed.get("ProgramArguments") or [""])[0]
    if not os.path.isabs(program):
        problems.append(f"the program {program!r} is not an absolute path")
    env = parsed.get("EnvironmentVariables") or {}
    for key, value in {**ctx.environment(), SUPERVISOR_ENV: "launchd"}.items():
        if env.get(key) != value:
            problems.append(f"EnvironmentVariables.{key} is {env.get(key)!r}, expected {value!r}")
    listener = ((parsed.get("Sockets") or {}).get("Listeners")) or {}
    if listener.get("SockPathName") != str(ctx.locations.socket):
        problems.append("Sockets.Listeners.SockPathName is not the memoryd socket")
    if problems:
        raise ServiceError("the rendered LaunchAgent plist is wrong: " + "; ".join(problems))
    return parsed


# --- systemd ------------------------------------------------------------------------------------------


def _systemd_quote(value: str, *, exec_line: bool) -> str:
    """One double-quoted word for a unit file (systemd.syntax(7): C-style escapes inside quotes; ``%``
    starts a specifier, ``$`` a variable on Exec lines)."""
    if "\n" in value:
        raise ServiceError(f"a path with a newline cannot go into a systemd unit: {value!r}")
    quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if exec_line:
        quoted = quoted.replace("$", "$$")
    return f'"{quoted}"'


def render_units(ctx: Context) -> dict[str, str]:
    """``{"memoryd.service": text, "memoryd.socket": text}`` for ``ctx``. Raises :class:`ServiceError`
    for a socket path systemd's ``ListenStream=`` cannot hold (whitespace)."""
    env = ctx.environment()
    socket_path = str(ctx.locations.socket)
    if any(ch.isspace() for ch in socket_path):
        raise ServiceError(
            f"the socket path {socket_path!r} has whitespace, which ListenStream= cannot hold; "
            "set MEMORYD_SOCKET to a path without spaces and install again"
        )

    def assign(key: str) -> str:
        return _systemd_quote(f"{key}={env[key]}", exec_line=False)

    values = {
        "marker": MARKER,
        "python": _systemd_quote(ctx.python, exec_line=True),
        "locale": ctx.locale,
        "board": assign("MEMORYD_BOARD"),
        "index": assign("MEMORYD_INDEX"),
        "models": assign("MEMORYD_MODELS"),
        "socket": assign("MEMORYD_SOCKET"),
        "log_file": assign(LOG_FILE_ENV),
        "extra_env": "\n".join(f"Environment={assign(key)}" for key in OPTIONAL_ENV if key in env),
        "socket_path": socket_path.replace("%", "%%"),
    }
    return {name: _fill(name, values) for name in (SERVICE_TEMPLATE, SOCKET_TEMPLATE)}


def verify_units(paths: list[Path]) -> str | None:
    """Run ``systemd-analyze --user verify`` on the written units.

    Returns ``None`` when it passed, or a note saying why nothing was verified (the tool is absent or
    cannot start). Raises :class:`ServiceError` with the lines about our units when it finds a problem:
    ``verify`` exits 0 after mere warnings (an unknown key, a bad value), so any line naming one of our
    files counts as a problem.
    """
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return "systemd-analyze is not installed; the units were not verified"
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="memoryd-verify-") as runtime:
        # --user needs a runtime dir (no login session: CI, ssh without PAM)
        if not os.path.isdir(env.get("XDG_RUNTIME_DIR", "")):
            env["XDG_RUNTIME_DIR"] = runtime
        try:
            done = subprocess.run(
                [tool, "--user", "verify", *map(str, paths)],
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"systemd-analyze could not run ({exc}); the units were not verified"
    lines = (done.stdout + done.stderr).splitlines()
    ours = [line for line in lines if any(str(p) in line or p.name in line for p in paths)]
    if ours:
        raise ServiceError("systemd-analyze verify found problems:\n" + "\n".join(ours))
    if done.returncode != 0:
        last = lines[-1] if lines else f"exit status {done.returncode}"
        return f"systemd-analyze could not verify the units ({last})"
    return None
