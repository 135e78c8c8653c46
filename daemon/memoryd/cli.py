"""``memoryd`` command line (contract §5): serve, status, search, eval, and the commands of
:data:`COMMAND_MODULES`.

A command module exposes ``register(sub)``: it adds its parser(s) to the ``argparse`` sub-parsers ``sub``
and sets ``func`` (``args -> exit code``) with ``set_defaults``. Modules are imported only to build the
parser; heavy imports belong inside ``func``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from memoryd import __version__

#: Modules adding sub-commands through ``register(sub)`` (one line per module; order = help order).
COMMAND_MODULES: tuple[str, ...] = (
    "memoryd.import_cli",
    "memoryd.connect.cli",
    "memoryd.forget_cli",
    "memoryd.export_cli",
    "memoryd.service.cli",
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memoryd", description="A shared, always-warm memory for coding agents.")
    p.add_argument("--version", action="version", version=f"memoryd {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the daemon in the foreground (JSON logs on stderr)")
    s.add_argument("--board", help="board folder (default: <data>/board, or MEMORYD_BOARD)")
    s.add_argument(
        "--index",
        help="index folder (default: MEMORYD_INDEX, else the board's own: <data>/index for <data>/board)",
    )
    s.add_argument("--socket", help="Unix socket path (default: <state>/memoryd.sock, or MEMORYD_SOCKET)")
    s.add_argument("--model", help="embedding model name, model folder, or 'none' for keyword-only search")

    st = sub.add_parser("status", help="ask the running daemon; exit 0 when up, 3 when not running")
    st.add_argument("--socket")
    st.add_argument("--json", action="store_true")

    q = sub.add_parser(
        "search",
        help="the same search agents get, for a person at a terminal (through the running daemon; "
        "in-process when none runs)",
    )
    q.add_argument("query")
    q.add_argument("--project", help="only this project")
    q.add_argument("--limit", type=_search_limit, default=10, help="results to show, 1-50 (default 10)")
    q.add_argument("--json", action="store_true", help="print the search_briefs answer as one JSON object")
    q.add_argument("--board", help="search this board (in-process unless the running daemon serves it)")
    q.add_argument("--index", help="index folder for the in-process search (default: the board's own)")
    q.add_argument("--socket", help="the daemon's socket (default: <state>/memoryd.sock, or MEMORYD_SOCKET)")
    q.add_argument("--model", help="embedding model for the in-process fallback, or 'none'")

    e = sub.add_parser("eval", help="score the shipped search on a labelled board or a public corpus")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--board", type=Path)
    src.add_argument("--corpus", type=Path)
    src.add_argument(
        "--small",
        type=Path,
        metavar="DIR",
        help="stores of 1, 3, 10 and 50 records cut from DIR (shared/eval)",
    )
    e.add_argument("--queries", type=Path, help="the labelled queries (--board, --corpus)")
    e.add_argument("--seeds", type=int, default=8, help="--small: slices per set and size (default 8)")
    e.add_argument("--scope", choices=("prefix", "global"), default="global")
    e.add_argument("--model")
    e.add_argument("--json", action="store_true")

    for name, func in (
        ("serve", cmd_serve),
        ("status", cmd_status),
        ("search", cmd_search),
        ("eval", cmd_eval),
    ):
        sub.choices[name].set_defaults(func=func)
    import importlib

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return p


def _load_embedder(settings):
    from memoryd.index.embed import load_embedder

    embedder, status = load_embedder(settings.model, settings.locations.models)
    if embedder is None and status.state != "disabled":
        print(f"memoryd: embedding model unavailable ({status.detail}); keyword-only search", file=sys.stderr)
    return embedder


def cmd_eval(args) -> int:
    from memoryd import eval as ev
    from memoryd.settings import Settings

    settings = Settings.load(model=args.model)
    if args.small:
        return _eval_small(args, settings)
    if args.queries is None:
        print("memoryd eval: --queries is required with --board and --corpus", file=sys.stderr)
        return 2
    for path in (args.board or args.corpus, args.queries):
        if not path.exists():
            print(f"memoryd eval: {path} does not exist", file=sys.stderr)
            return 2
    embedder = _load_embedder(settings)
    if args.board:
        report = ev.board_eval(args.board, args.queries, embedder, settings.locations.cache)
    else:
        report = ev.corpus_eval(args.corpus, args.queries, args.scope, embedder, settings.locations.cache)
    print(json.dumps(report, ensure_ascii=False) if args.json else ev.format_table(report))
    return 0


def _eval_small(args, settings) -> int:
    from memoryd import eval_small

    for part in ("board-v1", "locomo"):
        if not (args.small / part).exists():
            print(f"memoryd eval: {args.small / part} does not exist", file=sys.stderr)
            return 2
    if args.seeds < 1:
        print("memoryd eval: --seeds must be at least 1", file=sys.stderr)
        return 2
    report = eval_small.small_store_eval(args.small, _load_embedder(settings), seeds=args.seeds)
    print(json.dumps(report) if args.json else eval_small.format_small(report))
    return 0


def _search_limit(value: str) -> int:
    from memoryd.search_cli import limit_arg

    return limit_arg(value)


def cmd_search(args) -> int:
    """Through the running daemon; in-process (saying so on stderr) only when no daemon runs."""
    from memoryd.search_cli import run

    return run(args)


def cmd_serve(args) -> int:
    from memoryd.server import run

    return run(board=args.board, index=args.index, socket=args.socket, model=args.model)


def cmd_status(args) -> int:
    from memoryd.status import main as status_main

    return status_main(socket=args.socket, as_json=args.json)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from memoryd.logs import configure

    # The daemon logs its life at info; a command run at a terminal shows only warnings and errors.
    configure(None if args.func is cmd_serve else os.environ.get("MEMORYD_LOG_LEVEL") or "warning")
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `memoryd ... | head`: the reader left; no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
