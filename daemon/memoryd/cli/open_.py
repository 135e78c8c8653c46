"""``memoryd open [--print] [--socket PATH]``: open the page of the running daemon in the default browser.

The daemon must serve HTTP (``memoryd serve --http``, ``MEMORYD_HTTP_PORT``, ``memoryd service install
--http``); its port is read from ``http.json`` beside the socket (:mod:`memoryd.http.files`). The browser
gets ``http://127.0.0.1:<port>/open?token=<one-time code>``: the code works once and for two minutes,
and the daemon answers it with the HttpOnly cookie that keeps the page open, so the long-lived token never
appears in a URL, the browser's history or ``ps``.

Exit codes: 0 opened (the page's address printed, never the one-time link), or without a browser the
one-time URL printed on stderr; 3 the daemon is not serving HTTP (the message says how to turn it on); 1
the files beside the socket are unusable.
"""

from __future__ import annotations

import sys

from memoryd.cli.options import SERVED_SOCKET_HELP, command, locations

EXIT_NOT_SERVING = 3


def register(sub) -> None:
    """Add ``open`` to the ``argparse`` sub-parsers ``sub``."""
    p = command(
        sub, "open", cmd_open, help="open the page in the default browser (hands the token over once)"
    )
    locations(p, socket=SERVED_SOCKET_HELP)
    p.add_argument(
        "--print", action="store_true", dest="print_only", help="print the one-time URL instead of opening it"
    )


def _turn_on(socket_path, me: str) -> str:
    """How to turn HTTP on here: a daemon already running must be stopped first (``memoryd serve --http``
    would be refused), the service's daemon is reinstalled with ``--http``; where no service manager can be
    used, only ``memoryd serve --http`` in a terminal kept open."""
    from memoryd.cli.service.manager import manager_here
    from memoryd.http import files
    from memoryd.serve.control import ask_status

    try:
        status = ask_status(socket_path)
    except ValueError:
        status = None
    manager = manager_here()
    then = f"then run `{me} open` again."
    serve = f"`{me} serve --http` in a terminal you keep open"
    if status and status.get("activation"):
        return f"It runs as the {status['activation']} service: run `{me} service install --http`, {then}"
    if status and status.get("sessions"):
        how = (
            f"run `{me} service install --http` (or close those agents, `{me} stop`, `{me} serve --http`)"
            if manager
            else f"close those agents, run `{me} stop`, then {serve} (this machine has no service manager)"
        )
        return (
            f"The running daemon (pid {status.get('pid')}) was started without HTTP, and the shims of the "
            f"agents connected to it start one without HTTP again as soon as it stops: {how}, {then}"
        )
    if status:
        keep = (
            f" (or `{me} service install --http` to keep it running)"
            if manager
            else " in a terminal you keep open"
        )
        return (
            f"The running daemon (pid {status.get('pid')}) was started without HTTP: stop it with `{me} stop`, "
            f"then run `{me} serve --http`{keep}, {then}"
        )
    if not manager:
        return f"Turn it on: {serve} (port {files.DEFAULT_PORT}), {then}"
    return (
        f"Turn it on: `{me} serve --http` (port {files.DEFAULT_PORT}), or for the service "
        f"`{me} service install --http` (or MEMORYD_HTTP_PORT={files.DEFAULT_PORT}), {then}"
    )


def cmd_open(args) -> int:
    import webbrowser

    from memoryd.http import files
    from memoryd.paths import memoryd_command, resolve

    socket_dir = resolve(socket=args.socket).socket.parent
    try:
        serving = files.read_port(socket_dir)
    except OSError as exc:
        print(f"memoryd open: {exc}", file=sys.stderr)
        return 1
    if serving is None:
        print(
            f"memoryd open: the daemon is not serving HTTP (no {files.port_path(socket_dir)}).\n"
            f"{_turn_on(resolve(socket=args.socket).socket, memoryd_command())}",
            file=sys.stderr,
        )
        return EXIT_NOT_SERVING
    try:
        code = files.new_handover(socket_dir)
    except OSError as exc:
        print(f"memoryd open: cannot write the one-time code beside the socket: {exc}", file=sys.stderr)
        return 1
    url = f"http://127.0.0.1:{serving['port']}/open?token={code}"
    if args.print_only:
        print(url)
        return 0
    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if not opened:
        print(
            f"memoryd open: no browser to open here; open this URL yourself within "
            f"{files.HANDOVER_TTL_S:.0f} s (it works once):\n{url}",
            file=sys.stderr,
        )
    else:  # the page's own address: the one-time link is spent once the browser has used it
        print(f"opened http://127.0.0.1:{serving['port']}/ in your browser")
    return 0
