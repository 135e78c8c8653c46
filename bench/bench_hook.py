"""Claude Code Stop hook latency (not a test): ``memoryd hook claude-stop`` as Claude Code runs it.

    .venv/bin/python bench/bench_hook.py [--runs 20] [--turns 2000] [--json]

Wall time from spawning ``<venv python> -m memoryd hook claude-stop`` to its exit, p50/p95, for:

* ``allow (stop_hook_active)``: the cheapest path (input read, no transcript);
* ``block (brief turn)``: a transcript of ``--turns`` earlier turns (tool calls included) whose last turn
  opened with a brief that has no outcome: the full path (reverse transcript read, board look-up);
* ``python -c pass``: the floor no Python program beats on this machine.

The target is an answer within 1 s; no daemon runs here, so the board comes from MEMORYD_BOARD.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import summary

BRIEF = "b-20261129-a1b2c3"


def transcript(path: Path, turns: int) -> None:
    lines = []
    for n in range(turns):
        lines.append({"type": "user", "timestamp": "2026-11-29T08:00:00.000Z", "message": {"role": "user", "content": f"step {n}"}})  # fmt: skip
        use = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "ls -la " * 20}}
        lines.append({"type": "assistant", "message": {"role": "assistant", "content": [use]}})
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * 2000}
        lines.append({"type": "user", "message": {"role": "user", "content": [result]}})
    lines.append({"type": "user", "timestamp": "2026-11-29T09:00:00.000Z", "message": {"role": "user", "content": f"memoryd brief {BRIEF}: go"}})  # fmt: skip
    lines.append({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]}})  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def timed(argv: list[str], stdin: str, env: dict[str, str], runs: int) -> tuple[list[float], str]:
    samples, out = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=True)
        samples.append((time.perf_counter() - start) * 1000)
        out = done.stdout
    return samples, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "board" / "briefs" / BRIEF).mkdir(parents=True)
        (root / "board" / "briefs" / BRIEF / "prompt.md").write_text("go\n")  # the handed prompt
        path = root / "t.jsonl"
        transcript(path, args.turns)
        env = {**os.environ, "MEMORYD_HOME": str(root / "home"), "MEMORYD_BOARD": str(root / "board")}
        hook = [sys.executable, "-m", "memoryd", "hook", "claude-stop"]
        rows = {}
        rows["python -c pass"], _ = timed([sys.executable, "-c", "pass"], "", env, args.runs)
        active = json.dumps({"transcript_path": str(path), "stop_hook_active": True})
        rows["allow (stop_hook_active)"], out = timed(hook, active, env, args.runs)
        assert out == "", out
        full = json.dumps({"transcript_path": str(path), "stop_hook_active": False})
        rows["block (brief turn)"], out = timed(hook, full, env, args.runs)
        assert json.loads(out)["decision"] == "block", out
        size_mb = path.stat().st_size / 1e6
    report = {name: summary(values) for name, values in rows.items()}
    if args.json:
        print(json.dumps({"transcript_mb": round(size_mb, 1), "ms": report}))
        return 0
    print(
        f"memoryd hook claude-stop, transcript {size_mb:.1f} MB ({args.turns} earlier turns), {args.runs} runs"
    )
    print(f"{'case':<28} {'p50 ms':>8} {'p95 ms':>8}")
    for name, s in report.items():
        print(f"{name:<28} {s['p50']:>8.0f} {s['p95']:>8.0f}")
    print("target: every answer within 1000 ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
