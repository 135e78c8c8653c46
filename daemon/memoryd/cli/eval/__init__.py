"""``memoryd eval``: score the shipped search on a labelled board, a public corpus, or small stores.

``--board DIR --queries FILE`` and ``--corpus FILE --queries FILE`` (:mod:`.labelled`); ``--small DIR``
(:mod:`.small`); ``--filing DIR`` (:mod:`.filing`: filing captured prompts into tasks). Exit codes: 0 scored, 2 a missing file or a bad option.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memoryd.cli.options import command


def register(sub) -> None:
    """Add the ``eval`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    e = command(sub, "eval", cmd_eval, help="score the shipped search on a labelled board or a public corpus")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--board", type=Path)
    src.add_argument("--corpus", type=Path)
    src.add_argument(
        "--small",
        type=Path,
        metavar="DIR",
        help="stores of 1, 3, 10 and 50 records cut from DIR (shared/eval)",
    )
    src.add_argument(
        "--filing",
        type=Path,
        metavar="DIR",
        help="file the labelled prompt sequences built from DIR (shared/eval) into tasks; tune thresholds",
    )
    e.add_argument("--dump-set", type=Path, metavar="FILE", help="--filing: also write the set as JSON lines")
    e.add_argument("--queries", type=Path, help="the labelled queries (--board, --corpus)")
    e.add_argument("--seeds", type=int, default=8, help="--small: slices per set and size (default 8)")
    e.add_argument("--scope", choices=("prefix", "global"), default="global")
    e.add_argument("--model")
    e.add_argument("--json", action="store_true")


#: The folders of a ``--small`` or ``--filing`` data set.
SETS = ("board-v1", "locomo")


def _load_embedder(settings):
    from memoryd.index.embed import load_embedder

    embedder, status = load_embedder(settings.model, settings.locations.models)
    if embedder is None and status.state != "disabled":
        print(f"memoryd: embedding model unavailable ({status.detail}); keyword-only search", file=sys.stderr)
    return embedder


def _missing(*paths) -> bool:
    """Whether one of ``paths`` does not exist (the first one missing is said on stderr)."""
    for path in paths:
        if not path.exists():
            print(f"memoryd eval: {path} does not exist", file=sys.stderr)
            return True
    return False


def cmd_eval(args) -> int:
    from memoryd.cli.eval import labelled
    from memoryd.settings import Settings

    settings = Settings.load(model=args.model)
    # every path this command names, on stderr, in the table and in --json, is the resolved one
    for name in ("board", "corpus", "queries", "small", "filing"):
        if getattr(args, name, None) is not None:
            setattr(args, name, getattr(args, name).expanduser().resolve())
    if args.small:
        return _eval_small(args, settings)
    if args.filing:
        return _eval_filing(args, settings)
    if args.queries is None:
        print("memoryd eval: --queries is required with --board and --corpus", file=sys.stderr)
        return 2
    if _missing(args.board or args.corpus, args.queries):
        return 2
    embedder = _load_embedder(settings)
    if args.board:
        report = labelled.board_eval(args.board, args.queries, embedder, settings.locations.cache)
        report = {**report, "board": str(args.board), "queries_file": str(args.queries)}
    else:
        report = labelled.corpus_eval(
            args.corpus, args.queries, args.scope, embedder, settings.locations.cache
        )
        report = {**report, "corpus": str(args.corpus), "queries_file": str(args.queries)}
    print(json.dumps(report, ensure_ascii=False) if args.json else labelled.format_table(report))
    return 0


def _eval_small(args, settings) -> int:
    from memoryd.cli.eval import small

    if _missing(*(args.small / part for part in SETS)):
        return 2
    if args.seeds < 1:
        print("memoryd eval: --seeds must be at least 1", file=sys.stderr)
        return 2
    report = small.small_store_eval(args.small, _load_embedder(settings), seeds=args.seeds)
    print(json.dumps(report) if args.json else small.format_small(report))
    return 0


def _eval_filing(args, settings) -> int:
    from memoryd.cli.eval import filing, filingset

    if _missing(*(args.filing / part for part in SETS)):
        return 2
    if args.dump_set:
        filingset.dump(filingset.build_set(args.filing), args.dump_set)
    report = filing.filing_eval(args.filing, settings.locations.models, settings.model)
    if report["model"] != "ready" and settings.model != "none":
        print(f"memoryd: embedding model {report['model']}; keyword-only filing", file=sys.stderr)
    print(json.dumps(report, ensure_ascii=False) if args.json else filing.format_filing(report))
    return 0
