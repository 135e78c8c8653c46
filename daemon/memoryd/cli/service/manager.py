"""Which service manager runs memoryd here, and one summary of its state for ``memoryd doctor``.

The choice: launchd on macOS, systemd on Linux when ``systemctl`` is on ``PATH`` and systemd is the
machine's init (PID 1), else none: containers and WSL without systemd have ``systemctl`` but nothing it can
talk to, and there the daemon simply runs whenever an agent's shim starts it (:func:`no_manager_reason`).
``MEMORYD_SERVICE_MANAGER=launchd|systemd`` forces it: for tests, which run the commands against
recording stubs on Linux CI, and for unusual setups. Nothing else reads that variable.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from typing import Any

from memoryd.cli.service.common import Actions, ServiceError, quiet, run
from memoryd.cli.service.launchd import LaunchdManager
from memoryd.cli.service.systemd import SystemdManager
from memoryd.cli.service.templates import Context

MANAGER_ENV = "MEMORYD_SERVICE_MANAGER"
MANAGERS = {"launchd": LaunchdManager, "systemd": SystemdManager}

Manager = LaunchdManager | SystemdManager


def choose(env: Mapping[str, str] | None = None, platform: str | None = None) -> str | None:
    """``"launchd"``, ``"systemd"`` or ``None`` (no supported service manager here). Raises
    :class:`ServiceError` for an unknown ``MEMORYD_SERVICE_MANAGER``."""
    env = os.environ if env is None else env
    forced = env.get(MANAGER_ENV)
    if forced:
        if forced not in MANAGERS:
            raise ServiceError(f"{MANAGER_ENV}={forced!r}: choose launchd or systemd")
        return forced
    platform = sys.platform if platform is None else platform
    if platform == "darwin":
        return "launchd"
    if platform.startswith("linux") and shutil.which("systemctl") and systemd_is_init():
        return "systemd"
    return None


def manager_here() -> bool:
    """Whether ``memoryd service install`` has a service manager to use here (launchd, or systemd as init);
    True for a bad ``MEMORYD_SERVICE_MANAGER`` (``memoryd service`` then says what is wrong)."""
    try:
        return choose() is not None
    except ServiceError:
        return True


def systemd_is_init() -> bool:
    """Whether systemd runs this machine (PID 1). ``systemctl is-system-running`` prints ``offline`` (or
    "System has not been booted with systemd") when it does not; any other answer, even a failure to
    reach the bus, counts as systemd being there (its user session may merely be missing)."""
    probe = run(["systemctl", "is-system-running"], None)
    said = f"{probe.out}\n{probe.err}"
    return not (probe.out.strip() == "offline" or "not been booted with systemd" in said)


def no_manager_reason(platform: str | None = None) -> str:
    """One plain paragraph for a machine without a service manager memoryd can use: nothing to install,
    the shim starts the daemon, and how to run it by hand."""
    from memoryd.paths import memoryd_command

    platform = sys.platform if platform is None else platform
    why = (
        "PID 1 is not systemd, so there is no systemd user session to run it"
        if platform.startswith("linux")
        else "memoryd uses launchd on macOS and systemd on Linux"
    )
    me = memoryd_command()
    return (
        f"this machine has no service manager memoryd can use ({why}). Nothing needs installing: the "
        "daemon starts whenever an agent's memoryd-shim needs it. To run it by hand, keep a terminal open "
        f"with `{me} serve` (or `{me} serve --http PORT` for HTTP clients)"
    )


def get_manager(
    name: str | None = None, actions: Actions | None = None, http_port: int | None = None
) -> Manager:
    """The manager object for ``name`` (default: :func:`choose`); ``http_port`` overrides
    ``MEMORYD_HTTP_PORT`` for the definitions. Raises :class:`ServiceError` when there is none here."""
    name = name or choose()
    if name is None:
        raise ServiceError(no_manager_reason())
    platform = "darwin" if name == "launchd" else "linux"
    return MANAGERS[name](Context.current(platform=platform, http_port=http_port), actions or quiet())


def service_state(manager: str | None = None) -> dict[str, Any]:
    """The service as one dict, for ``memoryd doctor`` and ``memoryd service status``.

    Keys: ``manager`` (``"launchd"``, ``"systemd"`` or ``None``), ``installed`` (bool: our plist/units are
    in place), ``running`` (bool, or ``None`` when the manager cannot tell), ``detail`` (one line for
    people), ``fix`` (the command that fixes the problem found, or ``None``). Never raises.
    """
    try:
        name = manager or choose()
    except ServiceError as exc:
        return {"manager": None, "installed": False, "running": None, "detail": str(exc), "fix": None}
    if name is None:
        return {
            "manager": None,
            "installed": False,
            "running": None,
            "detail": no_manager_reason(),
            "fix": None,
        }
    try:
        mgr = get_manager(name)
        st = mgr.state()
    except ServiceError as exc:
        return {"manager": name, "installed": False, "running": None, "detail": str(exc), "fix": None}
    out: dict[str, Any] = {
        "manager": name,
        "installed": st.installed,
        "running": st.running,
        "detail": st.detail,
        "fix": None,
    }
    if st.loaded is None:
        out["detail"] = f"{name} cannot be asked ({st.detail}); the daemon runs when a shim starts it"
    elif not st.installed:
        out["detail"] = f"not installed as a {name} service ({st.detail})"
        out["fix"] = "memoryd service install"
    elif not st.current:
        out["detail"] = (
            f"the installed {name} definition is out of date (another interpreter or other paths); {st.detail}"
        )
        out["fix"] = "memoryd service install"
    elif st.running is False:
        out["fix"] = "memoryd service start"
    elif st.running:
        stale = _stale_daemon(mgr)
        if stale:
            out["detail"] = f"{st.detail}; {stale}"
            out["fix"] = "memoryd service restart"
    return out


def _stale_daemon(mgr: Manager) -> str | None:
    """Why the running daemon should be restarted (an older version than installed), or ``None``."""
    from memoryd import __version__
    from memoryd.serve.control import ask_status

    try:
        status = ask_status(mgr.ctx.locations.socket)
    except ValueError as exc:
        return str(exc)
    if status and status.get("version") and status["version"] != __version__:
        return f"the running daemon is memoryd {status['version']} but {__version__} is installed"
    return None
