"""A long Stripe secret key written in prose leaves no piece anywhere memoryd hands out or writes itself: a
real daemon (keyword-only), the real shim and the real CLI.

The key is 107 characters, where detect-secrets' Stripe pattern takes 24 after the prefix; before whole-token
redaction the answer, the brief's files and the export kept the other ~75 in clear text. Stored through
``store_memory`` it is searched for and exported; stated in ``memoryd brief`` it is filed into ``said.txt``,
``brief.json`` and a task whose title comes from the text, then searched for and read back through the brief
tools. No answer, no file the daemon or the CLI wrote and no export may hold any 8-character piece of it. The
memory's own file is the developer's text and keeps it (that is checked, so the test sees the key was there).
"""

from __future__ import annotations

import json
import shutil

from support.briefs import Shim, cli_env, memoryd
from support.daemon import DaemonProcess, short_tmpdir
from support.memories import MemShim, wait_engine_ready

KEY = (
    "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"
    "Hu9Iv0Jw1Kx2"
)
PIECES = [KEY[i : i + 8] for i in range(len(KEY) - 7)]


def leaked(text: str) -> list[str]:
    return [p for p in PIECES if p in text]


def test_a_long_stripe_key_in_prose_leaves_no_piece_in_answers_board_files_or_the_export():
    root = short_tmpdir()
    board, index = root / "board", root / "index"
    daemon = DaemonProcess(root, board=board, index=index)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        answers: list[str] = []
        with MemShim(daemon.socket, daemon.env).initialize() as s:
            s.ok(
                "store_memory", content=f"Prod Stripe secret is {KEY} - rotate before launch", tags=["stripe"]
            )
            hits = s.full("search_memories", query="stripe secret")
            answers.append(json.dumps(hits))
            assert not leaked(answers[-1]), leaked(answers[-1])[:3]
            assert "[REDACTED:api-key] - rotate before launch" in answers[-1]  # the hit is there, redacted
        env = cli_env(root, board, index, daemon.socket)
        filed = memoryd(env, "brief", f"rotate the Stripe key {KEY} before the launch", "--project", "shop")
        assert filed.returncode == 0, filed.stderr
        brief_id = filed.stdout.strip()
        answers += [filed.stdout, filed.stderr]
        with Shim(daemon.socket, daemon.env).initialize() as b:
            answers.append(json.dumps(b.ok("search_briefs", query="rotate the Stripe key")))
            answers.append(json.dumps(b.ok("get_brief", brief_id=brief_id)))
            answers.append(json.dumps(b.ok("list_tasks")))
            answers.append(json.dumps(b.ok("get_context")))
        assert "[REDACTED:api-key]" in answers[-4], answers[-4]  # search_briefs found the brief
        assert (
            "rotate the Stripe key [REDACTED:api-key] before the launch" in answers[-1]
        )  # the digest shows it
        out = root / "export.jsonl"
        exported = memoryd(env, "export", str(out), "--board", str(board), "--json")
        assert exported.returncode == 0, exported.stderr
        answers.append(exported.stdout)
        for answer in answers:
            assert not leaked(answer), answer
        export = out.read_text()
        assert "[REDACTED:api-key]" in export and not leaked(export), leaked(export)
        said = (board / "briefs" / brief_id / "said.txt").read_text()
        assert "rotate the Stripe key [REDACTED:api-key] before the launch" in said, said
        written = {p: p.read_text(errors="replace") for p in board.rglob("*") if p.is_file()}
        mine = {p: t for p, t in written.items() if "memories" not in p.relative_to(board).parts}
        assert any(p.parent.name == "tasks" or "tasks" in p.parts for p in mine), sorted(mine)
        assert {str(p.relative_to(board)): leaked(t) for p, t in mine.items() if leaked(t)} == {}
        # The memory file is the developer's own text: the key really was stored.
        assert any(KEY in t for p, t in written.items() if p not in mine)
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)
