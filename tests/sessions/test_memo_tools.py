"""The ``memo`` tools and ``memo://all`` through the official SDK client (a daemon served in-process), and
``memoryd import --from memo``."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time

import pytest
from mcp.shared.exceptions import MCPError
from sessions_e2e import call, client, fails

from support.daemon import REPO

MEMORYD = REPO / ".venv" / "bin" / "memoryd"
STAMP = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z"


def run(coro):
    return asyncio.run(coro)


def test_memo_add_and_search_answer_rules(served):
    async def main():
        async with client(served, tools="memo") as c:
            saved = []
            for text, tags in (
                ("Rotate the staging TLS cert before May", ["ops", "tls"]),
                ("Grandma's soup: more thyme", ["recipe"]),
                ("The TLS handshake bug was a clock skew", ["bug"]),
            ):
                answer, txt = await call(c, "memo_add", text=text, tags=tags)
                assert re.fullmatch(f"saved: {STAMP}", txt) and answer["saved"] in txt
                saved.append(answer)
            again, txt = await call(c, "memo_add", text="Grandma's soup: more thyme")
            assert again["isNew"] is False and txt.startswith("saved: ")

            found, txt = await call(c, "memo_search", query="tls")  # text or tag, any case
            lines = txt.splitlines()
            assert re.match(r"2 of \d+ memos contain \"tls\"", lines[0]), txt
            assert found["matched"] == 2 and found["shown"] == 2
            # newest first, each line `timestamp text [tags]`
            assert lines[1] == f"{saved[2]['saved']} The TLS handshake bug was a clock skew [bug]"
            assert lines[2] == f"{saved[0]['saved']} Rotate the staging TLS cert before May [ops, tls]"
            only_tag, _ = await call(c, "memo_search", query="RECIPE")
            assert [m["text"] for m in only_tag["memos"]] == ["Grandma's soup: more thyme"]
            one, txt = await call(c, "memo_search", query="tls", limit=1)
            assert one["shown"] == 1 and "newest 1 is shown" in txt.splitlines()[0], txt
            _, txt = await call(c, "memo_search", query="thyme")
            assert re.match(r"1 of \d+ memos contains \"thyme\"", txt), txt  # one found: "contains"
            none = await c.call_tool("memo_search", {"query": "zebra crossing"})
            assert none.is_error is False
            assert none.content[0].text.startswith('no memo contains "zebra crossing"')
            assert none.structured_content["matched"] == 0
            # MCP 2025-11-25: argument errors are tool execution errors naming the argument
            assert "limit" in await fails(c, "memo_search", query="x", limit=51)
            assert "tags/0" in await fails(c, "memo_add", text="x", tags=["two words"])
            for blank in ("", "   "):  # nothing to look for finds nothing, never every memo
                empty, txt = await call(c, "memo_search", query=blank)
                assert empty["matched"] == empty["shown"] == 0 and empty["memos"] == [], empty
                assert txt.startswith("no memo contains")

    run(main())


def test_memo_all_resource_newest_first(served):
    async def main():
        async with client(served, tools="memo") as c:
            await call(c, "memo_add", text="resource probe one")
            await call(c, "memo_add", text="resource probe two")
            listed = await c.list_resources()
            assert [str(r.uri) for r in listed.resources] == ["memo://all"]
            read = await c.read_resource("memo://all")
            text = read.contents[0].text
            assert re.match(r"\d+ memos, newest first\.", text)
            assert text.index("resource probe two") < text.index("resource probe one")
            assert "Truncated" not in text
            with pytest.raises(MCPError) as missing:
                await c.read_resource("memo://nothing")
            assert missing.value.error.code == -32002

    run(main())


def _write_memo_jsonl(path, n_good: int, broken_middle: bool = True, torn_last: bool = True) -> None:
    lines = [
        json.dumps(
            {
                "at": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
                "text": f"imported memo {i}",
                "tags": ["bulk", "imp ort"],
            }
        )
        for i in range(n_good)
    ]
    if broken_middle:
        lines.insert(len(lines) // 2, '{"at": "2024-01-01", "text": ')
    data = "\n".join(lines) + "\n"
    if torn_last:
        data += '{"at":"2024-02-02T00:00:00Z","te'
    path.write_text(data)


def test_import_memo_file_then_resource_is_bounded(served, tmp_path):
    source = tmp_path / "memo.jsonl"
    _write_memo_jsonl(source, 205)
    done = subprocess.run(
        [str(MEMORYD), "import", "--from", "memo", str(source), "--board", str(served.board), "--json"],
        capture_output=True,
        text=True,
        env=served.env,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # imported, with skipped lines
    summary = json.loads(done.stdout)
    assert summary["memories"]["new"] == 205 and len(summary["skipped"]) == 2
    assert {s["where"] for s in summary["skipped"]} == {"line 103", "line 207"}

    async def main():
        async with client(served, tools="memo") as c:
            deadline = time.monotonic() + 30
            while True:  # the daemon's watcher indexes the new files
                found, _ = await call(c, "memo_search", query="imported memo", limit=50)
                if found["matched"] == 205 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert found["matched"] == 205
            assert found["memos"][0]["text"] == "imported memo 204"  # newest first
            assert found["memos"][0]["tags"] == ["bulk", "imp_ort"]
            text = (await c.read_resource("memo://all")).contents[0].text
            assert "Truncated: the newest 200 are shown" in text
            assert len([ln for ln in text.splitlines() if re.match(STAMP, ln)]) == 200

    run(main())
