"""``memoryd eval --filing DIR``: how often a captured prompt is filed into the task it belongs to.

The labelled set (:mod:`memoryd.cli.eval.filingset`) is replayed through the daemon's own filing path: an
:class:`memoryd.core.engine.Engine` on a fresh board in a temporary folder (real index, the real model when
it loads), whose :meth:`memoryd.core.capture.Capture.filing_scores` searches each prompt among the open
tasks of its project exactly as a captured prompt is searched, once with the model ("hybrid") and once
without ("keyword"). Each prompt is then written into its *labelled* task (teacher forcing), so every
decision is made on a board that holds the right history, and decisions do not depend on one another.

Because the scores do not depend on the thresholds, :func:`tune` searches a grid of
:class:`memoryd.kinds.briefs.filing.Thresholds` offline: ``join`` and ``gap`` on the prompts without a
session task, the session rules (``switch``, ``margin``, ``fresh``, ``new_words``) on the others,
each minimising the mean **cost** over case types on the tuning split: a right decision costs 0, a
prompt wrongly filed as a new task 1, a prompt wrongly joined to a task (the wrong one, or any when a new
task was due) :data:`WRONG_JOIN` (ties: the most prompts right, then the values nearest the shipped
ones). The report gives accuracy (decision == label; "new" is right only when a new task starts), join
precision (the share of decisions to join a task, a session's included, that chose the right one) and
the cost, for the shipped thresholds and the tuned ones, on both splits.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from memoryd.cli.eval.filingset import CASES, Step, build_set
from memoryd.kinds.briefs.filing import DEFAULTS, Thresholds, choose_task

MODES = ("hybrid", "keyword")
GRID = {
    "join": [round(0.05 + 0.05 * i, 2) for i in range(16)],
    "switch": [round(0.3 + 0.05 * i, 2) for i in range(14)],
    "margin": [0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4],
    "fresh": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
    # not below 12: the set's prompts are whole briefs, it has no short follow-ups ("now add a test")
    "new_words": [12, 16, 24, 1_000_000],
    "gap": [0.0, 0.05, 0.1, 0.15, 0.2, 0.3],
}
#: Cost of a wrong join relative to a wrong new task (a new task costs the developer nothing; a wrong
#: join pollutes a task's history and the digest, and tells the agent it continues earlier work).
WRONG_JOIN = 3.0
BOARD_CASES = CASES[:-1]


@dataclass
class Decision:
    """What one scored prompt gives :func:`choose_task`: per mode ``{gold label: score}``; ``current``
    and ``expected`` are gold labels (None: no session task / a new task must start)."""

    case: str
    split: str
    board: bool
    current: str | None
    expected: str | None
    words: int
    scores: dict[str, dict[str, float]]


async def collect(steps: list[Step], models: Path, model: str) -> tuple[list[Decision], str]:
    """Replay ``steps`` on a fresh engine; returns the decisions and the model's state ("ready", ...)."""
    from memoryd.core.engine import Engine
    from memoryd.settings import Settings

    with tempfile.TemporaryDirectory(prefix="memoryd-filing-") as home:
        env = {"MEMORYD_HOME": home, "MEMORYD_MODELS": str(models), "PATH": os.environ.get("PATH", "")}
        engine = Engine(Settings.load(model=model, env=env))
        await engine.start()
        try:
            while engine.model.state == "loading":
                await asyncio.sleep(0.05)
            return await _replay(engine, steps), engine.model.state
        finally:
            await engine.close()


async def _replay(engine, steps: list[Step]) -> list[Decision]:
    capture, searcher = engine.capture, engine.searcher
    model = searcher.embedder
    filed: dict[str, str] = {}  # gold label -> task id on the eval board
    label_of: dict[str, str] = {}
    on: dict[str, str] = {}  # agent session -> gold label of its last prompt
    closed: set[str] = set()
    out: list[Decision] = []
    for step in steps:
        current = on.get(step.session)
        current = current if current in filed and current not in closed else None
        if step.case:
            scores = {}
            for mode in MODES if model is not None else ("keyword",):
                searcher.embedder = model if mode == "hybrid" else None
                try:
                    by_id, _ = await capture.filing_scores(step.prompt, step.project)
                finally:
                    searcher.embedder = model
                scores[mode] = {label_of[t]: s for t, s in by_id.items()}
            expected = step.gold if step.gold in filed else None
            board = not step.group.startswith("locomo-")
            words = len(step.prompt.split())
            out.append(Decision(step.case, step.split, board, current, expected, words, scores))
        req = {"event": "brief", "text": step.prompt, "project": step.project}
        req |= {"task": filed[step.gold]} if step.gold in filed else {"new_task": step.prompt}
        answer = await capture.handle(req)
        filed.setdefault(step.gold, answer["task"])
        label_of[answer["task"]] = step.gold
        on[step.session] = step.gold
        for gold in step.close:
            await _close(engine, filed[gold])
            closed.add(gold)
    return out


async def _close(engine, task_id: str) -> None:
    from memoryd.board import atomic
    from memoryd.board.gate import open_root
    from memoryd.kinds.briefs.source import task_path

    task = engine.briefs.tasks()[task_id]
    data = json.dumps({**task.to_json(), "status": "done"}).encode("utf-8")
    with open_root(engine.board) as root, root.child("tasks") as tasks:
        atomic.write_replace(tasks, f"{task_id}.json", data)
    await engine.indexer.submit(paths=[task_path(task_id)])


def accuracy(decisions: Iterable[Decision], mode: str, th: Thresholds) -> dict:
    """``{"n", "overall", "board", "balanced", "join_precision", "board_join_precision", "cost",
    "by_case": {case: {"n", "acc", "cost"}}}`` of ``th`` on ``decisions``; ``cost`` is the mean over case
    types (module docstring), a precision with no join is 1.0."""
    right: dict[str, list[bool]] = defaultdict(list)
    costs: dict[str, list[float]] = defaultdict(list)
    joins: dict[str, list[bool]] = defaultdict(list)
    for d in decisions:
        if mode in d.scores:
            got = choose_task(d.scores[mode], d.current, d.words, th).task
            ok = got == d.expected
            right[d.case].append(ok)
            costs[d.case].append(0.0 if ok else WRONG_JOIN if got is not None else 1.0)
            if got is not None:
                joins[d.case].append(ok)
    every = [ok for oks in right.values() for ok in oks]
    board = [ok for case in BOARD_CASES for ok in right.get(case, [])]
    by_case = {
        c: {"n": len(right[c]), "acc": _mean(right[c]), "cost": _mean(costs[c])}
        for c in CASES
        if right.get(c)
    }
    return {
        "n": len(every),
        "overall": _mean(every),
        "board": _mean(board),
        "balanced": _mean([v["acc"] for v in by_case.values()]),
        "join_precision": _mean([ok for oks in joins.values() for ok in oks], empty=1.0),
        "board_join_precision": _mean([ok for c in BOARD_CASES for ok in joins.get(c, [])], empty=1.0),
        "cost": _mean([v["cost"] for v in by_case.values()]),
        "by_case": by_case,
    }


def _mean(values: list, empty: float = 0.0) -> float:
    return round(sum(values) / len(values), 4) if values else empty


def tune(decisions: list[Decision], mode: str, start: Thresholds) -> Thresholds:
    """The grid point (module docstring) best on ``decisions`` (the tuning split)."""
    alone = [d for d in decisions if d.current is None and mode in d.scores]
    going = [d for d in decisions if d.current is not None and mode in d.scores]

    def pick(subset: list[Decision], names: tuple[str, ...]) -> dict:
        best, best_key = {}, None
        for values in itertools.product(*(GRID[n] for n in names)):
            th = replace(start, **dict(zip(names, values, strict=True)))
            acc = accuracy(subset, mode, th)
            near = sum(abs(getattr(th, n) - getattr(start, n)) / (GRID[n][-1] or 1) for n in names)
            key = (-acc["cost"], acc["overall"], -near)
            if best_key is None or key > best_key:
                best, best_key = dict(zip(names, values, strict=True)), key
        return best

    chosen = pick(alone, ("join", "gap"))
    chosen |= pick(going, ("switch", "margin", "fresh", "new_words"))
    return replace(start, **chosen)


def filing_eval(root: Path, models: Path, model: str) -> dict:
    """Build the set from ``root`` (shared/eval), replay it, tune per mode; the report (see the CLI)."""
    from memoryd.cli.eval.filingset import describe

    steps = build_set(root)
    started = time.monotonic()
    decisions, model_state = asyncio.run(collect(steps, models, model))
    report: dict = {"set": describe(steps), "model": model_state, "modes": {}}
    for mode in MODES:
        if not any(mode in d.scores for d in decisions):
            continue
        tuning = [d for d in decisions if d.split == "tune"]
        held = [d for d in decisions if d.split == "held"]
        tuned = tune(tuning, mode, DEFAULTS[mode])
        report["modes"][mode] = {
            "shipped": asdict(DEFAULTS[mode]),
            "tuned": asdict(tuned),
            "shipped_held": accuracy(held, mode, DEFAULTS[mode]),
            "shipped_all": accuracy(decisions, mode, DEFAULTS[mode]),
            "tuned_tune": accuracy(tuning, mode, tuned),
            "tuned_held": accuracy(held, mode, tuned),
        }
    report["seconds"] = round(time.monotonic() - started, 1)
    return report


def format_filing(report: dict) -> str:
    """A readable table: accuracy per case for each mode, shipped vs tuned thresholds."""
    s = report["set"]
    lines = [
        f"filing set: {s['prompts']} prompts, {s['scored']} scored "
        f"({', '.join(f'{k} {v}' for k, v in s['by_split'].items())}); model: {report['model']}"
    ]
    for mode, r in report["modes"].items():
        cols = ("shipped_all", "shipped_held", "tuned_tune", "tuned_held")
        lines += ["", f"{mode}: shipped {_th(r['shipped'])}", f"{' ' * len(mode)}  tuned   {_th(r['tuned'])}"]
        lines.append(f"{'case':<24}" + "".join(f"{c:>14}" for c in cols))
        for case in CASES:
            cells = [r[c]["by_case"].get(case) for c in cols]
            if any(cells):
                lines.append(f"{case:<24}" + "".join(f"{_cell(x):>14}" for x in cells))
        for key in ("board", "overall", "balanced", "join_precision", "board_join_precision", "cost"):
            lines.append(f"{key:<24}" + "".join(f"{r[c][key]:>14.3f}" for c in cols))
    lines.append(f"({report['seconds']} s)")
    return "\n".join(lines)


def _cell(x: dict | None) -> str:
    return f"{x['acc']:.3f} ({x['n']})" if x else ""


def _th(th: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in th.items())
