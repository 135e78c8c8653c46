"""``get_context`` and the ``briefs://context`` resources end to end: a real daemon with the real model on a
board written here, the real shim (raw JSON-RPC lines) and the official SDK client.

The digest is the session-start hook's: the same open tasks newest first with their Open items, within the
budget counted with the model's own tokenizer, marked as data, with planted secrets redacted; a resource read
gives the same text as the tool, and the hook's own answer is that text too.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket

import pytest

from support.board import write_brief, write_task
from support.briefs import NOTE, SHIM, Shim
from support.daemon import DaemonProcess
from support.hooks import make_repo
from support.memories import warm_daemon

AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WORDS = [
    "cart",
    "search",
    "invoice",
    "profile",
    "wishlist",
    "coupon",
    "review",
    "shipping",
    "returns",
    "login",
]
# Ten open shopfront tasks, the newest last; a done one newer still; a payments task newer than all of them.
OPEN = [f"t-202602{10 + i:02d}-{i + 1:06x}" for i in range(10)]
DONE = "t-20260225-0000dd"
PAYMENTS = "t-20260301-0000aa"
TASK_LINE = re.compile(r"^- (t-\d{8}-[0-9a-f]{6}) ", re.M)

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")


def outcome(brief_dir, did: list[str], open_items: list[str]) -> None:
    body = (
        "## Did\n"
        + "".join(f"- {d}\n" for d in did)
        + "\n## Open\n"
        + "".join(f"- {o}\n" for o in open_items)
    )
    (brief_dir / "outcome.md").write_text(body, encoding="utf-8")


def write_board(board) -> None:
    (board / "tasks").mkdir(parents=True)
    (board / "briefs").mkdir()
    for i, task in enumerate(OPEN):
        day = f"2026-02-{10 + i:02d}"
        write_task(board, task, title=f"Rework the {WORDS[i]} page", created_at=f"{day}T09:00:00Z")
        brief = write_brief(
            board, f"b-{task[2:10]}-{i + 1:06x}", task, said=f"the {WORDS[i]} page is slow",
            title=f"Speed up the {WORDS[i]} page", created_at=f"{day}T10:00:00Z",
        )  # fmt: skip
        outcome(brief, [f"profiled the {WORDS[i]} page"], [f"check the {WORDS[i]} page on Safari"])
    # The newest open task carries the planted secrets, in what was said, its title and its Open items.
    newest = board / "briefs" / f"b-{OPEN[-1][2:10]}-00000a"
    data = json.loads((newest / "brief.json").read_text())
    (newest / "brief.json").write_text(json.dumps({**data, "title": f"Deploy the login page with {AWS_ID}"}))
    (newest / "said.txt").write_text(f"deploy it, the secret is {AWS_SECRET}")
    outcome(newest, ["deployed"], [f"rotate the leaked key {AWS_ID}"])
    write_task(board, DONE, title="Ship the footer", status="done", created_at="2026-02-25T09:00:00Z")
    write_brief(board, "b-20260225-0000dd", DONE, title="Ship the footer", created_at="2026-02-25T10:00:00Z")
    write_task(board, PAYMENTS, title="Retry the card capture", project="payments",
               created_at="2026-03-01T09:00:00Z")  # fmt: skip
    write_brief(board, "b-20260301-0000aa", PAYMENTS, project="payments", title="Retry captures",
                created_at="2026-03-01T10:00:00Z")  # fmt: skip


@pytest.fixture(scope="module")
def world(models_dir):
    """One daemon with the default model on the board above, and a git checkout of project shopfront."""
    with warm_daemon(models_dir, board=write_board, process=DaemonProcess) as daemon:
        repo = make_repo(daemon.root)  # origin .../shopfront.git, on branch fix/login-redirect
        with Shim(daemon.socket, daemon.env, cwd=str(repo), tools="all").initialize() as shim:
            for content in (f"The login page deploy key was {AWS_ID}; use the vault now",
                            "Login redirect fixes need a Safari check before merging"):  # fmt: skip
                stored = shim.call("store_memory", content=content, tags=["web"])["result"]
                assert stored["isError"] is False, stored
        yield daemon, repo


@pytest.fixture
def here(world):
    """A shim started in the shopfront checkout."""
    daemon, repo = world
    with Shim(daemon.socket, daemon.env, cwd=str(repo)).initialize() as shim:
        yield shim


def section(text: str, heading: str) -> str:
    body = text.split(heading + "\n", 1)[1]
    return body.split("\n## ", 1)[0].split("\n</memoryd-context>", 1)[0]


def test_open_tasks_newest_first_with_open_items_within_the_model_budget(here, embedder):
    answer = here.ok("get_context")
    text = answer["context"]
    assert answer["project"] == "shopfront" and answer["project_from"] == "cwd"
    assert answer["budget"] == 1500 and answer["counted_with"] == "model"
    assert answer["tokens"] == embedder.count_tokens(text) <= 1500
    assert text.startswith('<memoryd-context project="shopfront">') and text.endswith("</memoryd-context>")
    assert "not instructions" in text and answer["note"] == NOTE
    tasks = section(text, "## Open tasks (newest first)")
    shown = TASK_LINE.findall(tasks)
    assert shown == list(reversed(OPEN))[: len(shown)] and len(shown) >= 5  # newest first, done left out
    for task in shown[1:]:
        word = WORDS[OPEN.index(task)]
        assert f"open: check the {word} page on Safari" in tasks
    assert DONE not in tasks and PAYMENTS not in text
    assert "## Latest briefs" in text and "## Related memories" in text


def test_the_budget_drops_whole_items_and_zero_turns_it_off(here, embedder):
    full = here.ok("get_context", tokens=10_000)["context"]
    small = here.ok("get_context", tokens=150)
    assert small["tokens"] == embedder.count_tokens(small["context"]) <= 150 < embedder.count_tokens(full)
    lines = small["context"].splitlines()
    assert lines[0] == full.splitlines()[0] and TASK_LINE.search(small["context"])
    assert set(lines) <= set(full.splitlines())  # whole lines of the same digest, none cut
    off = here.ok("get_context", tokens=0)
    assert off["context"] == "" and off["tokens"] == 0 and "note" not in off


def test_planted_secrets_never_come_out(world, here):
    daemon, _ = world
    answer = here.ok("get_context", tokens=10_000, query="login page deploy key")
    everything = json.dumps(answer) + bytes(here.output).decode()
    assert AWS_ID not in everything and AWS_SECRET not in everything
    assert (
        "[REDACTED:aws-access-key-id]" in answer["context"] and answer["redacted"]["aws-access-key-id"] >= 2
    )
    assert "use the vault now" in answer["context"]  # the memory is there, redacted


def test_the_project_argument_and_the_fallbacks(world, here):
    daemon, _ = world
    asked = here.ok("get_context", project="PAYMENTS")
    assert (
        asked["project"] == "payments"
        and asked["project_from"] == "argument"
        and PAYMENTS in asked["context"]
    )
    unknown = here.ok("get_context", project="nowhere")
    assert unknown["context"] == "" and unknown["projects"] == ["payments", "shopfront"]
    with Shim(daemon.socket, daemon.env, cwd="/").initialize() as anywhere:  # no project at the root
        recent = anywhere.ok("get_context")
    assert recent["project"] == "payments" and recent["project_from"] == "recent"
    assert recent["context"] == asked["context"]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"tokens": -1}, "tokens"),
        ({"tokens": 10_001}, "tokens"),
        ({"tokens": "many"}, "tokens"),
        ({"tokens": True}, "tokens"),
        ({"project": ""}, "project"),
        ({"project": "x" * 101}, "project"),
        ({"query": 3}, "query"),
        ({"branch": "main"}, "branch"),
    ],
)
def test_wrong_arguments_are_clear_tool_errors(here, arguments, named):
    message = here.invalid("get_context", **arguments)
    assert message.startswith("Invalid arguments for tool get_context") and named in message


def test_resources_give_the_same_text_and_the_hook_too(world, here):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError

    daemon, repo = world
    tool = here.ok("get_context")["context"]
    payments = here.ok("get_context", project="payments")["context"]
    server = StdioServerParameters(
        command=str(SHIM), args=["--socket", str(daemon.socket), "--no-start"], cwd=str(repo), env=daemon.env
    )

    async def main() -> dict[str, str]:
        async with Client(server) as client:
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            assert listed == ["briefs://context"] and templates == ["briefs://context/{project}"]
            out = {}
            for uri in ("briefs://context", "briefs://context/payments", "briefs://context/nowhere"):
                [content] = (await client.read_resource(uri)).contents
                assert content.mime_type == "text/plain"
                out[uri] = content.text
            for missing in ("briefs://context/", "briefs://context/a/b", "briefs://contexts"):
                with pytest.raises(MCPError) as failed:
                    await client.read_resource(missing)
                assert failed.value.error.code == -32002
            return out

    read = asyncio.run(main())
    assert read["briefs://context"] == tool and read["briefs://context/payments"] == payments
    assert read["briefs://context/nowhere"].startswith("Nothing recorded yet for project nowhere")
    # The session-start hook's answer comes from the same builder: the same text for the same checkout.
    request = {"event": "start", "agent": "claude-code", "session": "fresh", "cwd": str(repo), "tokens": 1500}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(daemon.socket))
        sock.sendall(json.dumps({"memoryd": "capture", "v": 1, "request": request}).encode() + b"\n")
        answer = json.loads(sock.makefile("rb").readline())
    assert answer["capture"]["context"] == tool
