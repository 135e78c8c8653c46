"""``memoryd doctor``'s check of the agents connected over HTTP (``memoryd connect --http``).

An HTTP entry names a URL and no command: nothing starts the daemon for it (only an agent's
``memoryd-shim`` does, and a daemon a shim started serves no HTTP unless ``MEMORYD_HTTP_PORT`` is in the
environment the shim passes). So for each agent whose entry is an HTTP one (``http AGENT``), the daemon must
answer and serve HTTP on the entry's port (the status answer's ``http`` block ``{"url", "port",
"sessions"}``); otherwise the agent's calls are refused (ECONNREFUSED) and that is a problem, with its fix:

* no daemon, or one without HTTP: the service with HTTP (``memoryd service install --http PORT``: it is
  always running and stops a daemon a shim started first); where there is no service manager, ``memoryd
  stop && memoryd serve --http PORT`` (without the stop when none runs) in a terminal kept open;
* a daemon serving HTTP on another port (a busy port fell back to a free one): ``memoryd connect --http
  AGENT`` points the entry at the port served now.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from memoryd.cli.connect.doctor import OK, PROBLEM, Check, _me


def http_entries() -> list[tuple[str, str]]:
    """``(agent name, URL)`` for every agent whose memoryd entry is an HTTP entry."""
    from memoryd.cli.connect import manage
    from memoryd.cli.connect.agents import known_agents

    found = []
    for agent in known_agents():
        st = manage.status(agent)
        if st.state == "connected" and st.url:
            found.append((agent.name, st.url))
    return found


def _port(url: str) -> int | None:
    try:
        parts = urlsplit(url)
        return parts.port or (80 if parts.scheme == "http" else None)
    except ValueError:
        return None


def _has_service_manager() -> bool:
    """Whether launchd or a systemd user manager answers here (then ``memoryd service install`` works)."""
    try:
        from memoryd.cli.service.manager import choose, get_manager

        name = choose()
        return name is not None and get_manager(name).state().loaded is not None
    except Exception:  # noqa: BLE001 - another component; the service check reports its failures
        return False


def _always_on(port: int, service: bool, running: bool) -> str:
    """The command that gets a daemon serving HTTP on ``port`` and keeps it running (``running``: a daemon
    without HTTP answers now and must stop first)."""
    if service:
        return (
            _me(f"service install --http {port}") + "   (the service serves HTTP from now on, at every login)"
        )
    stop = f"{_me('stop')} && " if running else ""
    return f"{stop}{_me(f'serve --http {port}')}   (in a terminal you keep open while agents use HTTP)"


def run(status: dict[str, Any] | None) -> list[Check]:
    """One check per agent connected over HTTP; ``status``: the daemon's status answer (``None``: not running)."""
    entries = http_entries()
    if not entries:
        return []
    service = _has_service_manager()
    http = (status or {}).get("http")
    served = http.get("port") if isinstance(http, dict) else None
    checks = []
    for name, url in entries:
        port = _port(url)
        label, shown = f"http {name}", url.split("?")[0]
        if port is None:
            checks.append(
                Check(label, PROBLEM, f"the entry's URL {shown} names no port", _me(f"connect --http {name}"))
            )
        elif status is None:
            detail = f"connected over HTTP ({shown}), but no daemon runs: the agent's calls are refused"
            checks.append(Check(label, PROBLEM, detail, _always_on(port, service, False)))
        elif served is None:
            detail = (
                f"connected over HTTP ({shown}), but the running daemon (pid {status.get('pid')}) serves no "
                "HTTP (a shim started it, or it was started without --http): the agent's calls are refused"
            )
            checks.append(Check(label, PROBLEM, detail, _always_on(port, service, True)))
        elif served != port:
            detail = f"the entry points at port {port}, but the daemon serves HTTP on port {served}"
            checks.append(Check(label, PROBLEM, detail, _me(f"connect --http {name}")))
        else:
            checks.append(Check(label, OK, f"connected over HTTP; the daemon serves {shown}"))
    return checks
