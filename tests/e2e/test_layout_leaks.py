"""Nothing leaks, whatever the layout of the file: every secret kind redaction knows, in every layout of
:mod:`support.layouts` (bullets, continuation lines, code fences, quotes, indentation, split over lines, CRLF),
in every place a stored text lives, through every path that hands stored text out.

One keyword-only daemon serves a board built for this module: per secret kind a task, and per layout a
brief whose ``outcome.md``, ``notes.md``, ``said.txt``, ``prompt.md`` and screen text each hold their
own copy of the secret (every copy is different, so a leak names its place), a hand-written memory
file, and a line of a hand-written session file; through the real shim, the same secret also goes into
``store_memories``, ``memo_add`` and ``add_memory``. Then every answer path is called for every case
(``get_brief``, ``get_task``, ``list_tasks``, ``search_briefs``, ``get_memory``, ``search_memories``,
``memo_search``, ``memo://all``, ``get_relationships``, ``recall``, ``memory_stats``, ``get_session_memories``,
``query_raw_memories``, ``summarize_sessions``, ``get_all_summaries``), ``export_database`` writes its file, and ``memoryd forget --now`` purges the
index. No piece of any secret may be in any byte the shim printed, the export file, the index folder,
the summaries memoryd wrote or the daemon's log; no private-key marker line may be left in a case's own
answers. :func:`test_the_text_around_each_secret_is_seen` shows each sink carries the words around the
secrets (a check that could see nothing would prove nothing).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.briefs import SHIM, wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir
from support.layouts import KINDS, LAYOUTS, Secret, lay_out, word
from support.memories import MemShim  # noqa: E402
from support.privacy import forget_now, index_bytes

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

BRIEF_PLACES = ("outcome", "notes", "said", "prompt", "screen")
PLACES = (*BRIEF_PLACES, "memory-file", "stored-memory", "memo", "session-file", "added-turn")
#: Kinds whose secret is one whitespace-free token: it can also be a tag, and sits in titles.
TOKEN_KINDS = ("aws", "github", "slack", "stripe", "anthropic", "openai", "jwt", "url")
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
CREATED = "2026-01-05T10:00:00Z"


def _hex(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:6]


def _content_hash(text: str) -> str:
    return hashlib.sha256(
        unicodedata.normalize("NFC", text.replace("\r\n", "\n")).rstrip().encode()
    ).hexdigest()


@dataclass
class Case:
    """One secret kind in one layout: a secret and a canary word per place, and the case's own answers."""

    name: str
    layout: str
    secrets: dict[str, Secret] = field(default_factory=dict)
    words: dict[str, str] = field(default_factory=dict)
    own: list[str] = field(default_factory=list)  # the answers of the calls made for this case alone
    memory_file: str = ""
    stored: str = ""
    guessed: int = 0  # what memo_search / a tag filter found for a piece of a secret (must be nothing)

    def __post_init__(self) -> None:
        make = KINDS[self.name]
        places = list(PLACES)
        if self.layout == "plain" and self.name in TOKEN_KINDS:
            places += ["title", "tag", "relation"]
        for place in places:
            self.secrets[place] = make(f"{self.name}/{self.layout}/{place}")
            self.words[place] = word(f"{self.name}/{self.layout}/{place}")

    @property
    def brief_id(self) -> str:
        return f"b-20260105-{_hex(self.name, self.layout)}"

    def text(self, place: str, head: str = "") -> str:
        """The place's canary line, the secret in the case's layout, and a line after it."""
        newline = "\r\n" if self.layout == "crlf" else "\n"
        body = lay_out(self.secrets[place].lines, self.layout)
        return newline.join([f"{head}{self.words[place]} {place}", body, f"{head}after the {place} secret"])

    def token(self, place: str) -> str:
        secret = self.secrets[place]
        return next(t for t in " ".join(secret.lines).split() if any(p in t for p in secret.pieces))


def fragments(piece: str) -> list[str]:
    """The piece, and its runs of 8-40 letters and digits: the index keeps a long token only as such runs
    (it splits at punctuation and drops terms over 40 characters), and an answer may cut a piece."""
    runs = [r for r in re.split(r"[^A-Za-z0-9]+", piece) if 8 <= len(r) <= 40]
    return [piece.lower(), *(r.lower() for r in runs)]


def task_id(name: str) -> str:
    return f"t-20260105-{_hex(name)}"


def write_board(board: Path, cases: list[Case]) -> None:
    for sub in ("tasks", "briefs", "memories", "sessions"):
        (board / sub).mkdir(parents=True)
    for name in KINDS:
        task = {"id": task_id(name), "title": f"Task {name}", "project": "redact", "status": "open",
                "created_at": CREATED}  # fmt: skip
        (board / "tasks" / f"{task['id']}.json").write_text(json.dumps(task))
    sessions: dict[str, list[str]] = {}
    for c in cases:
        d = board / "briefs" / c.brief_id
        (d / "screens").mkdir(parents=True)
        title = f"{c.name} in {c.layout}"
        if "title" in c.secrets:
            title += f" {c.words['title']} {c.token('title')}"
        meta = {"id": c.brief_id, "task": task_id(c.name), "project": "redact", "created_at": CREATED,
                "title": title, "summary": f"Where the {c.name} secret sits in {c.layout}"}  # fmt: skip
        (d / "brief.json").write_text(json.dumps(meta))
        (d / "said.txt").write_text(c.text("said"), newline="")
        (d / "prompt.md").write_text(c.text("prompt"), newline="")
        (d / "notes.md").write_text(c.text("notes", "- ") + "\n", newline="")
        outcome = f"## Did\n{c.text('outcome', '- ')}\n## Decided\n- none\n## Open\n- check it\n"
        (d / "outcome.md").write_text(outcome, newline="")
        (d / "screens" / "1.png").write_bytes(PNG)
        (d / "screens" / "1.txt").write_text(c.text("screen"), newline="")
        content = c.text("memory-file")
        tags = ["redact", c.token("tag")] if "tag" in c.secrets else ["redact"]
        front = (
            f"---\ntags: {json.dumps(tags)}\nimportance: 1\nmemory_type: fact\ncreated_at: '{CREATED}'\n---\n"
        )
        c.memory_file = _content_hash(content)
        (board / "memories" / f"{c.memory_file}.md").write_text(front + content + "\n", newline="")
        turn = {"id": f"mem_{c.layout}", "sessionId": f"f-{c.name}", "timestamp": CREATED,
                "prompt": c.text("session-file"), "thought": "", "response": "noted",
                "type": "agent-interaction"}  # fmt: skip
        sessions.setdefault(f"f-{c.name}", []).append(json.dumps(turn, ensure_ascii=False))
    for sid, lines in sessions.items():
        (board / "sessions" / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")


@dataclass
class Swept:
    cases: dict[tuple[str, str], Case]
    sinks: dict[str, str]  # where stored text can come out -> its lower-cased text


def _answer(shim: MemShim, name: str, **arguments) -> str:
    reply = shim.call(name, **arguments)
    assert "result" in reply and reply["result"].get("isError") is False, (name, arguments, reply)
    return json.dumps(reply["result"], ensure_ascii=False)


def sweep(shim: MemShim, guesser: MemShim, cases: list[Case], outputs: dict[str, list[str]]) -> None:
    """Every answer path for every case; ``guesser`` asks with pieces of secrets (its answers echo them,
    so they are no sink), counting what it finds in :attr:`Case.guessed`."""

    def call(name: str, case: Case | None = None, **arguments) -> dict:
        text = _answer(shim, name, **arguments)
        outputs.setdefault(name, []).append(text)
        if case is not None:
            case.own.append(text)
        return json.loads(text)["structuredContent"]

    for start in range(0, len(cases), 50):
        batch = cases[start : start + 50]
        items = [{"content": c.text("stored-memory"), "tags": ["redact"]} for c in batch]
        stored = call("store_memories", items=items, project="redact")
        for c, result in zip(batch, stored["result"]["results"], strict=True):
            c.stored = result["hash"]
    for c in cases:
        call("memo_add", text=c.text("memo"), tags=["redact"])
        call("add_memory", prompt=c.text("added-turn"), thought="", response="done", sessionId=f"a-{c.name}")
    call("list_tasks", limit=100)
    for name in KINDS:
        call("get_task", task_id=task_id(name))
        for sid in (f"f-{name}", f"a-{name}"):
            call("get_session_memories", sessionId=sid, limit=100)
    for c in cases:
        call("get_brief", c, brief_id=c.brief_id)
        call("search_briefs", c, query=c.words["outcome"], limit=5)
        for key in (c.memory_file, c.stored):
            call("get_memory", c, hash=key)
        call("search_memories", c, query=c.words["stored-memory"], limit=5)
        call("memo_search", c, query=c.words["memo"])
        # a guessed secret must not confirm that a memo holds it
        found = json.loads(_answer(guesser, "memo_search", query=c.secrets["memo"].pieces[-1]))
        c.guessed += found["structuredContent"]["matched"]
        for place in ("session-file", "added-turn"):
            call("query_raw_memories", c, query=c.words[place], nResults=5)
        if "tag" in c.secrets and len(c.token("tag")) <= 50:  # tags and relation types: 1-50 characters
            kind = c.token("relation")
            call("create_relationship", c, from_hash=c.memory_file, to_hash=c.stored, relation_type=kind)
            call("get_relationships", c, hash=c.memory_file)
            call("recall", c, query=c.words["memory-file"], depth=1, limit=5)
            # a guessed secret as a tag filter must not confirm the memory that carries it
            found = _answer(guesser, "search_memories", query=c.words["memory-file"], tags=[c.token("tag")])
            c.guessed += len(json.loads(found)["structuredContent"]["result"])
    call("memory_stats")
    call("summarize_sessions")
    call("get_all_summaries", limit=500)
    memo_all = shim.request("resources/read", {"uri": "memo://all"})
    outputs["memo://all"] = [json.dumps(memo_all, ensure_ascii=False)]


@pytest.fixture(scope="module")
def swept(request):
    root = short_tmpdir()
    cases = [Case(name, layout) for name in KINDS for layout in LAYOUTS]
    write_board(root / "board", cases)
    daemon = DaemonProcess(
        root, env={"MEMORYD_OPTIMIZE_INTERVAL_S": "3600", "MEMORYD_TOOL_TIMEOUT_MS": "60000"}
    )
    try:
        daemon.start()
        wait_engine_ready(daemon)
        outputs: dict[str, list[str]] = {}
        with (
            MemShim(daemon.socket, daemon.env, tools="all").initialize() as shim,
            MemShim(daemon.socket, daemon.env, tools="memories,memo").initialize() as guesser,
        ):
            sweep(shim, guesser, cases, outputs)
            exported = json.loads(_answer(shim, "export_database"))["structuredContent"]
        sinks = {name: "\n".join(texts).lower() for name, texts in outputs.items()}
        sinks["shim output"] = shim.output.decode("utf-8").lower()
        sinks["export file"] = Path(exported["path"]).read_text(encoding="utf-8").lower()
        summaries = sorted((daemon.board / "sessions").glob("*.summary.json"))
        assert len(summaries) == 2 * len(KINDS), summaries
        sinks["summary files"] = "\n".join(p.read_text() for p in summaries).lower()
        report = forget_now(daemon)
        assert report["records"] >= len(cases) * 5, report
        sinks["index files"] = index_bytes(daemon.root / "index").decode("utf-8", "replace")
        sinks["daemon log"] = daemon.log().lower()
        yield Swept({(c.name, c.layout): c for c in cases}, sinks)
    finally:
        daemon.kill()
        mine = [i for i in request.session.items if i.module is request.module]
        if any(getattr(i, "rep_call", None) and i.rep_call.failed for i in mine):
            print(f"\n--- layout-leaks daemon log ---\n{daemon.log()[-20000:]}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(KINDS))
def test_no_piece_of_the_secret_leaks_anywhere(swept, name, layout):
    case = swept.cases[(name, layout)]
    leaks = []
    for place, secret in case.secrets.items():
        for piece in secret.pieces:
            for bit in fragments(piece):
                leaks += [(place, sink, bit[:16]) for sink, data in swept.sinks.items() if bit in data]
    for marker in {m for s in case.secrets.values() for m in s.markers}:
        leaks += [("a marker line", "the case's answers", marker) for own in case.own if marker in own]
    if case.guessed:
        leaks.append(
            ("memo, tag", "a search for a piece of it (it confirms the secret)", f"{case.guessed} hit(s)")
        )
    assert not leaks, "\n".join(f"{place}: {piece}... in {sink}" for place, sink, piece in sorted(set(leaks)))


def test_the_text_around_each_secret_is_seen(swept):
    """Each sink carries the words around the secrets, so the leak checks above could see a leak."""
    missing = []
    for case in swept.cases.values():
        own = "\n".join(case.own)
        for place, w in case.words.items():
            if place in ("tag", "relation"):
                continue  # the secret's token alone
            wanted = ["index files"] + ([] if place == "screen" else ["export file"])
            missing += [
                (case.name, case.layout, place, sink) for sink in wanted if w not in swept.sinks[sink]
            ]
            if place != "screen" and w not in own:
                missing.append((case.name, case.layout, place, "its own answers"))
        if case.words["screen"] in swept.sinks["shim output"]:
            missing.append((case.name, case.layout, "screen text handed out", "shim output"))
    assert not missing, missing[:20]
