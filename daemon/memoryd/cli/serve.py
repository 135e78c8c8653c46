"""``memoryd serve``: run the daemon in the foreground (:mod:`memoryd.serve.daemon`); JSON logs on stderr.

``--http [PORT]`` also serves MCP Streamable HTTP and the page (:mod:`memoryd.http`).
"""

from __future__ import annotations

from memoryd.cli.options import BOARD_HELP, INDEX_HELP, command, locations
from memoryd.settings import port_arg

DEFAULT_HTTP_PORT = 7077  # memoryd.http.files.DEFAULT_PORT, without importing it to build the parser


def register(sub) -> None:
    """Add the ``serve`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    s = command(sub, "serve", cmd_serve, help="run the daemon in the foreground (JSON logs on stderr)")
    locations(
        s,
        board=BOARD_HELP,
        index=INDEX_HELP,
        socket="Unix socket path (default: <state>/memoryd.sock, or MEMORYD_SOCKET)",
    )
    s.add_argument("--model", help="embedding model name, model folder, or 'none' for keyword-only search")
    s.add_argument(
        "--http",
        nargs="?",
        type=port_arg,
        const=DEFAULT_HTTP_PORT,
        metavar="PORT",
        help=f"also serve MCP over HTTP and the page on 127.0.0.1/::1 (default port {DEFAULT_HTTP_PORT}; "
        "a busy port falls back to a free one; 0: off; or MEMORYD_HTTP_PORT)",
    )
    s.set_defaults(logs_at_info=True)


def cmd_serve(args) -> int:
    from memoryd.serve.daemon import run

    return run(board=args.board, index=args.index, socket=args.socket, model=args.model, http_port=args.http)
