"""``memoryd connect --http``: the URL and token an agent's HTTP entry gets, and what to say when nothing
serves HTTP all the time or a config holding the token is readable by others."""

from __future__ import annotations

import sys


def target() -> tuple[str, str] | None:
    """``(url, token)`` for HTTP entries: the port the daemon serves HTTP on (``http.json``), else the
    configured one (``MEMORYD_HTTP_PORT``, else 7077, with a note); the token is created if there is none.
    The URL carries no tool groups (:func:`url` adds them per agent)."""
    from memoryd.http import files
    from memoryd.paths import memoryd_command
    from memoryd.settings import Settings

    settings = Settings.load()
    socket_dir = settings.locations.socket.parent
    try:
        socket_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        serving = files.read_port(socket_dir)
        token = files.ensure_token(socket_dir)
    except OSError as exc:
        print(f"memoryd connect --http: {exc}", file=sys.stderr)
        return None
    port = serving["port"] if serving else settings.http_port or files.DEFAULT_PORT
    now = "" if serving else f"no daemon serves HTTP now; the entries point at port {port}. "
    if serving is None or not _service_serves_http(settings.locations.socket):
        from memoryd.cli.service.manager import manager_here

        me = memoryd_command()
        run = (
            f"Run `{me} service install --http {port}` (it runs at every login)"
            if manager_here()
            else f"This machine has no service manager memoryd can use: keep `{me} serve --http {port}` "
            "running in a terminal while agents use HTTP"
        )
        print(
            f"memoryd connect --http: {now}HTTP entries need a daemon that serves HTTP all the time: nothing "
            f"starts the daemon for them, and the one an agent's memoryd-shim starts serves no HTTP. {run}; "
            f"`{me} doctor` checks it.",
            file=sys.stderr,
        )
    return f"http://127.0.0.1:{port}/mcp", token


def url(base: str, tools: str | None) -> str:
    """``base`` with the tool groups of ``tools`` (comma-separated) as its ``?tools=`` query, if any."""
    groups = ",".join(part.strip() for part in tools.split(",") if part.strip()) if tools else ""
    return base + (f"?tools={groups}" if groups else "")


def _service_serves_http(socket_path) -> bool:
    """Whether the daemon answering on ``socket_path`` is the service's (its socket was passed in) and
    serves HTTP: then HTTP entries keep working without anyone's help."""
    from memoryd.serve.control import ask_status

    try:
        status = ask_status(socket_path)
    except ValueError:
        return False
    return bool(status and status.get("activation") and isinstance(status.get("http"), dict))


def token_exposure(path) -> str:
    """A warning when an agent config holding the token is readable by other users."""
    import stat

    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return ""
    if not mode & 0o077:
        return ""
    return (
        f"WARNING: it now holds memoryd's token and is readable by others (mode {mode:o}): chmod 600 {path}"
    )
