"""export_database / import_database and ``memoryd export`` / ``memoryd import --from jsonl`` end to end.

Two daemons served in-process (:mod:`support.inprocess_daemon`), spoken to through the official SDK
client, and the real CLI. Daemon A serves a copy of the sample board (briefs; screenshots removed, since an export carries no
PNGs) plus session turns, summaries and memos written through the tools. Its export, imported into
daemon B on an empty board, must give the same search results.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from sessions_e2e import call, client, fails

from support.briefs import board_files, copy_board, wait_engine_ready
from support.daemon import REPO, short_tmpdir
from support.inprocess_daemon import InprocessDaemon

MEMORYD = REPO / ".venv" / "bin" / "memoryd"

TURNS = [
    ("Why is the search page slow on mobile?", "profile first", "The image carousel loaded full-size JPEGs."),
    ("Make the carousel load thumbnails", "srcset", "Switched to srcset thumbnails; LCP down 40%."),
    ("Add a dark mode toggle to settings", "css variables", "Added the toggle with CSS variables."),
    ("Fix the flaky payment webhook test", "race", "The webhook test now waits for the queue to drain."),
]
QUERIES = ["slow search page mobile", "dark mode", "payment webhook", "thumbnails carousel", "checkout"]


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def pair(shared_board):
    """(daemon A with data, daemon B on an empty board); both killed at the end."""
    root = short_tmpdir()
    daemons = []
    try:
        board = copy_board(shared_board, root / "a-board")
        for screens in board.glob("briefs/*/screens"):
            shutil.rmtree(screens)
        a = InprocessDaemon(root / "a", board=board, env=ENV)
        b = InprocessDaemon(root / "b", env=ENV)
        for d in (a, b):
            d.root.mkdir(mode=0o700)
            daemons.append(d)
            d.start()
        for d in (a, b):
            wait_engine_ready(d)
        yield a, b
    finally:
        for d in daemons:
            d.kill()
        shutil.rmtree(root, ignore_errors=True)


async def _fill(c) -> list[str]:
    sids = []
    for n, (prompt, thought, response) in enumerate(TURNS):
        added, _ = await call(
            c,
            "add_memory",
            prompt=prompt,
            thought=thought,
            response=response,
            **({"sessionId": sids[0]} if n == 1 else {}),
        )
        if n != 1:
            sids.append(added["sessionId"])
    await call(c, "summarize_sessions")
    await call(c, "memo_add", text="carousel thumbnails are 320px wide", tags=["perf"])
    await call(c, "memo_add", text="dark mode colours live in theme.css", tags=["ui"])
    return sids


async def _results(c) -> dict:
    out = {}
    for q in QUERIES:
        raw, _ = await call(c, "query_raw_memories", query=q)
        summ, _ = await call(c, "query_summaries", query=q)
        memo, _ = await call(c, "memo_search", query=q.split()[0])
        briefs, _ = await call(c, "search_briefs", query=q)
        out[q] = {
            "raw": [(r["id"], r["sessionId"], r["relevanceScore"]) for r in raw["results"]],
            "summaries": [(r["sessionId"], r["title"], r["relevanceScore"]) for r in summ["results"]],
            "memos": [(m["timestamp"], m["text"], m["tags"]) for m in memo["memos"]],
            "briefs": [(r["brief_id"], r["score"]) for r in briefs["results"]],
        }
    listed, _ = await call(c, "get_all_summaries")
    out["all_summaries"] = [(s["sessionId"], s["title"], s["memoryCount"]) for s in listed["summaries"]]
    return out


GROUPS = "briefs,sessions,memo"
# Compact and rebuild the keyword index soon after writes in both daemons: BM25 statistics of an index
# built incrementally and one built in one go differ slightly (ties among capped keyword scores).
ENV = {"MEMORYD_TOOL_TIMEOUT_MS": "30000", "MEMORYD_OPTIMIZE_INTERVAL_S": "1"}


async def _settled(c) -> None:
    """Wait until the keyword index covers every row (healthcheck's index facts)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        health, _ = await call(c, "healthcheck")
        if health["index"]["unindexed_rows"] == 0:
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"index never settled: {health['index']}")


def test_export_then_import_into_an_empty_board_gives_the_same_results(pair):
    a, b = pair

    async def main():
        async with client(a, tools=GROUPS) as c:
            await _fill(c)
            await _settled(c)
            before = await _results(c)
            exported, text = await call(c, "export_database")
            assert Path(exported["path"]).parent == a.root / "home" / "data" / "exports"
            assert exported["counts"]["interaction"] == 4 and exported["counts"]["summary"] == 3
            assert exported["counts"]["memory"] == 2 and exported["counts"]["brief"] > 0
            assert exported["path"] in text
        async with client(b, tools=GROUPS) as c:
            # an agent may import only from memoryd's own exports folder (B's), never any path it names
            for outside in (exported["path"], "../../../etc/passwd", "/proc/self/environ"):
                with pytest.raises(Exception, match="exports folder"):
                    await call(c, "import_database", file=outside)
            b_exports = b.root / "home" / "data" / "exports"
            b_exports.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(exported["path"], b_exports / "from-a.jsonl")
            imported, text = await call(c, "import_database", file="from-a.jsonl")
            assert imported["rejected"] == [] and imported["searchable"] is True
            assert imported["written"]["interaction"] == 4 and imported["written"]["memory"] == 2
            await _settled(c)
            after = await _results(c)
            for key in before:
                for part in before[key] if isinstance(before[key], dict) else [None]:
                    b_, a_ = (
                        (before[key], after[key]) if part is None else (before[key][part], after[key][part])
                    )
                    assert a_ == b_, (key, part, b_, a_)
            assert any(v["raw"] for k, v in before.items() if k != "all_summaries")  # not vacuous
            assert any(v["briefs"] for k, v in before.items() if k != "all_summaries")
            again, _ = await call(c, "import_database", file="from-a.jsonl")  # merge twice: nothing new
            assert again["written"].get("interaction", 0) == 0 and again["kept"]["interaction"] == 4
        return exported["path"]

    path = run(main())
    assert json.loads(Path(path).read_text().splitlines()[0])["format"] == "memoryd-export"


def _corrupt(src: Path, dest: Path) -> int:
    """Interactions only, with a broken middle line and a torn last line; returns the line count."""
    lines = [ln for ln in src.read_text().splitlines() if json.loads(ln)["kind"] == "interaction"]
    lines = [json.dumps({**json.loads(ln), "id": f"copy-{n}"}) for n, ln in enumerate(lines)] * 3
    lines = [json.dumps({**json.loads(ln), "id": f"copy-{n}"}) for n, ln in enumerate(lines)]
    lines[len(lines) // 2] = '{"kind": "interaction", "id": "x", '
    dest.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    return len(lines)


def test_import_with_broken_and_torn_lines_and_a_refused_replace(pair, tmp_path):
    a, b = pair

    async def main():
        async with client(a, tools=GROUPS) as c:
            exported, _ = await call(c, "export_database", include=["interactions"])
        bad = b.root / "home" / "data" / "exports" / "broken.jsonl"
        bad.parent.mkdir(parents=True, exist_ok=True)
        n = _corrupt(Path(exported["path"]), bad)
        async with client(b, tools=GROUPS) as c:
            before = await _results(c)
            files = board_files(b.board)
            refused = await fails(c, "import_database", file="broken.jsonl", mode="replace")
            assert "replace refused: 2 line(s) rejected" in refused and "nothing was changed" in refused
            assert f"line {n // 2 + 1}:" in refused and f"line {n}: torn last line" in refused
            assert board_files(b.board) == files and await _results(c) == before
            merged, text = await call(c, "import_database", file="broken.jsonl")  # merge: the rest goes in
            assert merged["written"]["interaction"] == n - 2
            assert [r["line"] for r in merged["rejected"]] == [n // 2 + 1, n]
            assert f"line {n}: torn last line" in text

    run(main())


def test_hand_written_session_file_with_a_torn_last_line_loads_the_rest(pair):
    _, b = pair
    sessions = b.board / "sessions"
    lines = [
        json.dumps(
            {
                "id": f"h{n}",
                "sessionId": "handmade",
                "timestamp": f"2026-03-0{n + 1}T10:00:00Z",
                "prompt": f"handmade prompt {n} about kubernetes",
                "thought": "",
                "response": "ok",
                "type": "agent-interaction",
            }  # fmt: skip
        )
        for n in range(3)
    ]
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / ".tmp-handmade").write_text("\n".join(lines) + "\n" + lines[0][:30])
    (sessions / ".tmp-handmade").rename(sessions / "handmade.jsonl")

    async def main():
        async with client(b, tools="sessions") as c:
            deadline = time.monotonic() + 20
            while True:
                found, _ = await call(
                    c, "query_raw_memories", query="handmade kubernetes", sessionId="handmade"
                )
                if found["count"] == 3 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert found["count"] == 3
            page, text = await call(c, "get_session_memories", sessionId="handmade")
            assert page["total"] == 3 and page["skippedLines"] == 1 and "1 broken line" in text

    run(main())


def test_cli_export_and_import_jsonl(pair, tmp_path):
    a, _ = pair
    out = tmp_path / "cli-export.jsonl"
    env = {**a.env}
    done = subprocess.run(
        [str(MEMORYD), "export", str(out), "--board", str(a.board), "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["counts"]["interaction"] >= 4 and out.exists()
    target = tmp_path / "fresh-board"
    dry = subprocess.run(
        [str(MEMORYD), "import", "--from", "jsonl", str(out), "--board", str(target), "--json", "--dry-run"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] and planned["memories"]["new"] == result["counts"]["memory"] > 0, planned
    assert not (target / "memories").exists()  # a dry run writes nothing
    done = subprocess.run(
        [str(MEMORYD), "import", "--from", "jsonl", str(out), "--board", str(target), "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    summary = json.loads(done.stdout)
    assert summary["written"]["interaction"] == result["counts"]["interaction"]
    assert summary["written"]["memory"] == result["counts"]["memory"]
    again = subprocess.run(
        [str(MEMORYD), "export", str(tmp_path / "second.jsonl"), "--board", str(target), "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert json.loads(again.stdout)["counts"] == result["counts"]
    strip = [json.loads(ln) for ln in out.read_text().splitlines()[1:]]
    assert [json.loads(ln) for ln in (tmp_path / "second.jsonl").read_text().splitlines()[1:]] == strip
