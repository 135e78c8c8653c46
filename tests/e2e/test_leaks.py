"""Nothing planted leaks: the real daemon on a copy of the sample board, every
query of ``negatives.jsonl`` and a broad sweep of every ``briefs`` tool through the real shim, then
``memoryd forget --now``; neither the bytes the shim printed nor the bytes of the index folder may hold the
planted secrets, the removed screenshot's words or its file name.

What is planted is read from the board itself, with rules of this test's own (not memoryd's redaction):
AWS access key ids (``AKIA``/``ASIA`` + 16) and ``AWS_SECRET_ACCESS_KEY=<40 chars>`` assignments, and the
screen whose ``.txt``/``.json`` have no ``.png``. ``../shared/eval/README.md`` says what to expect (one
of each); the negatives must agree with what was found. The test can fail: it shows the planted strings
are on the board copy, that the index keeps the other words of the very same files verbatim (so a byte
search would see a leaked secret), and that the answers carry the text around the redacted secrets.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from support.briefs import NOTE, SHIM, Shim, copy_board, wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir
from support.privacy import TEXT_SUFFIXES, board_text, files_containing, forget_now, index_bytes, unique_words

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

BRIEF_TOOLS = {"search_briefs", "list_tasks", "get_task", "get_brief", "save_outcome", "get_context"}
KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")
SECRET_KEY = re.compile(r"(?i)aws_secret_access_key\s*[=:]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")
BAD_IDS = [
    "../tasks",
    "b-20260904-27e980/..",
    "%2e%2e%2fb-20260904-27e980",
    "/etc/passwd",
    "b-20260904-27e98\x00",
    "b-２０２６０９０４-27e980",
    "b-20260904-27E980",
    "b-20260904-27e980 ",
    "b" * 5000,
    "..\\..\\b-20260904-27e980",
]


class Planted:
    """What the sample board plants, found in its files: ``secrets`` (exact strings), ``fragments`` (the
    negatives' pieces of them), the removed screen (``brief``, ``screen``), its ``words`` that occur
    nowhere else on the board, and its ``paths`` (brief-relative file names)."""

    def __init__(self, board: Path, negatives: list[dict]) -> None:
        texts = {
            p: p.read_text(errors="replace")
            for p in board.rglob("*")
            if p.is_file() and p.suffix in TEXT_SUFFIXES
        }
        key_ids = {(m.group(0), p) for p, t in texts.items() for m in KEY_ID.finditer(t)}
        secret_keys = {(m.group(1), p) for p, t in texts.items() for m in SECRET_KEY.finditer(t)}
        # README: the AWS example access key id in one prompt, the example secret key in one screen text.
        assert len(key_ids) == 1 and next(iter(key_ids))[1].name == "prompt.md", key_ids
        assert len(secret_keys) == 1 and next(iter(secret_keys))[1].parent.name == "screens", secret_keys
        self.secrets = sorted(s for s, _ in key_ids | secret_keys)
        self.secret_files = sorted(p for _, p in key_ids | secret_keys)
        removed = sorted(
            (p.parent.parent.name, p.stem)
            for p in board.glob("briefs/*/screens/*")
            if p.suffix in (".txt", ".json") and not p.with_suffix(".png").exists()
        )
        assert len(set(removed)) == 1, removed  # README: one brief whose screen 2 lost its .png
        self.brief, self.screen = removed[0]
        screens = board / "briefs" / self.brief / "screens"
        self.screen_files = [screens / f"{self.screen}{suffix}" for suffix in (".txt", ".json")]
        screen_text = "\n".join(p.read_text() for p in self.screen_files if p.exists())
        self.words = unique_words(screen_text, board_text(board, skip=tuple(self.screen_files)), min_len=5)
        assert len(self.words) >= 5, self.words  # the test must have something to look for
        self.paths = [f"{self.brief}/screens/{self.screen}.{ext}" for ext in ("png", "txt", "json")]
        # The negatives agree: every piece of a "key" query is part of a planted secret, every word of a
        # "removed screen" query is in that screen's text.
        self.fragments: set[str] = set()
        low_secrets = [s.lower() for s in self.secrets]
        for neg in negatives:
            why = neg["why"].lower()
            if "key" in why:
                for piece in neg["query"].lower().split():
                    assert any(piece in s for s in low_secrets), neg
                    self.fragments.add(piece)
            elif "screen" in why:
                for word in re.findall(r"[A-Za-z]{4,}", neg["query"]):
                    assert word.lower() in screen_text.lower(), neg
        assert len(self.fragments) >= 8, self.fragments

    def forbidden(self) -> list[str]:
        """Lower-cased strings that may appear in no answer and no index file."""
        return sorted({*(s.lower() for s in self.secrets), *self.fragments, *self.words, *self.paths})


#: Words of our own appended to the files holding the planted material: proof that those very files are
#: indexed verbatim and (the prompt) handed out, so a secret in them would have been seen.
CANARIES = ("quorvantis", "belmorack")
REMOVED_CANARY = "trevistane"  # appended to the removed screen's text: it must leak nowhere either


@pytest.fixture(scope="module")
def served(shared_board):
    """(daemon, planted, negatives): a daemon on a board copy with the canaries appended."""
    source = shared_board.parent / "negatives.jsonl"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    negatives = [json.loads(line) for line in source.read_text().splitlines()]
    root = short_tmpdir()
    board = copy_board(shared_board, root / "board")
    planted = Planted(board, negatives)
    assert not [w for w in (*CANARIES, REMOVED_CANARY) if w in board_text(board)]
    for path, canary in zip(planted.secret_files, CANARIES, strict=True):
        with path.open("a") as f:
            f.write(f"\nNote: {canary}\n")
    with planted.screen_files[0].open("a") as f:
        f.write(f"\n{REMOVED_CANARY}\n")
    planted.words.add(REMOVED_CANARY)
    # Test tools off: the session sees exactly what an agent sees.
    daemon = DaemonProcess(root, board=board, env={"MEMORYD_TEST_TOOLS": "0"})
    try:
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon, planted, negatives
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def sweep(shim: Shim, board: Path, planted: Planted, negatives: list[dict]) -> dict[str, int]:
    """Call every tool of the group with many arguments; returns how many calls each tool got."""
    calls = dict.fromkeys(sorted(BRIEF_TOOLS), 0)

    def ok(name: str, **arguments) -> dict:
        calls[name] += 1
        return shim.ok(name, **arguments)

    def invalid(name: str, **arguments) -> None:
        calls[name] += 1
        shim.invalid(name, **arguments)

    tasks = [json.loads(p.read_text()) for p in sorted((board / "tasks").glob("*.json"))]
    projects = sorted({t["project"] for t in tasks})
    briefs = sorted(p.name for p in (board / "briefs").iterdir())
    titles = [json.loads((board / "briefs" / b / "brief.json").read_text())["title"] for b in briefs]
    key_briefs = [
        p.parent.name if p.name == "prompt.md" else p.parent.parent.name for p in planted.secret_files
    ]

    # search_briefs: every negative (all projects, each project, several limits), the removed screen's words
    # one by one and together, and queries close to the planted material.
    queries = [n["query"] for n in negatives]
    queries += sorted(planted.words) + [" ".join(sorted(planted.words))]
    queries += [
        "aws access key id",
        "secret access key credentials export",
        "AWS_SECRET_ACCESS_KEY",
        "pipeline-legacy static key bucket permissions",
        "chat window screenshot trip",
        "screens/2.png",
        "private chat long weekend",
    ]
    queries += [titles[briefs.index(b)] for b in {planted.brief, *key_briefs}]
    for query in queries:
        ok("search_briefs", query=query[:1000], limit=50)
        ok("search_briefs", query=query[:1000], limit=1)
        for project in projects:
            ok("search_briefs", query=query[:1000], project=project, limit=50)
    for title in titles[::7]:
        ok("search_briefs", query=title, limit=10)

    # list_tasks: every filter combination.
    ok("list_tasks")
    ok("list_tasks", limit=100)
    ok("list_tasks", limit=1)
    for status in ("open", "done"):
        ok("list_tasks", status=status, limit=100)
        for project in projects:
            ok("list_tasks", project=project, status=status, limit=100)

    # save_outcome: an agent pastes the planted secrets into its report; it is saved, never handed back.
    for brief in sorted({planted.brief, *key_briefs, briefs[0]}):
        ok(
            "save_outcome",
            brief_id=brief,
            did=[f"Rotated {planted.secrets[0]}", f"aws_secret_access_key = {planted.secrets[-1]}"],
            open=[f"Check where {' '.join(planted.secrets)} was used"],
            decided=["Keep the instance role"],
            files=["deploy/job.yaml"],
        )

    # get_task and get_brief: every id on the board (after the saves, so the outcomes are read back).
    for task in tasks:
        ok("get_task", task_id=task["id"])
    for brief in briefs:
        ok("get_brief", brief_id=brief)

    # get_context: every project at every budget, after the saves (so Open items carry the secrets), and
    # memories related to queries close to the planted material.
    for project in [None, *projects]:
        for tokens in (0, 120, 1500, 10_000):
            ok("get_context", **({"project": project} if project else {}), tokens=tokens)
    for query in queries[-12:]:
        ok("get_context", query=query[:1000], tokens=10_000)

    # Refused arguments never touch a file, and leak nothing either.
    for bad in BAD_IDS:
        invalid("get_brief", brief_id=bad)
        invalid("get_task", task_id=bad.replace("b-", "t-"))
        invalid("save_outcome", brief_id=bad, did=["x"], open=[])
        invalid("get_context", project=bad, tokens=-1)
    return calls


def test_no_planted_secret_or_removed_screen_leaks_to_any_answer_or_the_index(served):
    daemon, planted, negatives = served
    assert len(negatives) == 20 and all(n["expect"] == "none" for n in negatives)
    forbidden = planted.forbidden()

    # The planted material is really there, on the board copy the daemon reads.
    board_bytes = b"\n".join(p.read_bytes() for p in daemon.board.rglob("*") if p.is_file()).lower()
    for needle in forbidden:
        if needle not in planted.paths:
            assert needle.encode() in board_bytes, needle
    assert all(p.exists() for p in planted.screen_files)
    assert not (daemon.board / "briefs" / planted.paths[0]).exists()

    with Shim(daemon.socket, daemon.env).initialize() as shim:
        listed = {t["name"] for t in shim.request("tools/list")["result"]["tools"]}
        assert listed == BRIEF_TOOLS  # a new tool in the group must join the sweep
        calls = sweep(shim, daemon.board, planted, negatives)
        for neg in negatives:  # "must return nothing"
            answer = shim.ok("search_briefs", query=neg["query"], limit=50)
            assert answer["results"] == [], (neg, answer["results"][:2])
        key_brief = next(p.parent.name for p in planted.secret_files if p.name == "prompt.md")
        key_answer = shim.ok("get_brief", brief_id=key_brief)
    assert all(n >= 10 for n in calls.values()), calls
    output = shim.output.decode("utf-8")
    assert len(output) > 500_000, len(output)

    # The answers carry the text around the secrets (so a leak would have been seen), redacted.
    assert "[REDACTED:" in key_answer["prompt"] and key_answer["redacted"], key_answer
    assert CANARIES[0] in key_answer["prompt"] and "pipeline-legacy" in key_answer["prompt"]
    assert key_answer["outcome"] is not None and "[REDACTED:" in key_answer["outcome"]["did"][0]

    report = forget_now(daemon)
    assert report["records"] == 200
    index = daemon.root / "index"
    data = index_bytes(index)
    # The index keeps the other words of the very files that hold the planted material, verbatim.
    for canary in CANARIES:
        assert canary.encode() in data, canary
    assert CANARIES[1] not in output  # screen text: searchable, never handed out

    low_output = output.lower()
    leaks = [s for s in forbidden if s in low_output]
    assert not leaks, f"in the shim's output: {leaks}"
    leaks = [s for s in forbidden if s.encode() in data]
    assert not leaks, {s: files_containing(index, s) for s in leaks}


def test_every_tool_and_every_answer_with_stored_text_says_it_is_data(served):
    """Board text is data, not instructions: descriptions say it, and each answer carrying board text carries the data note."""
    daemon, _planted, _negatives = served
    brief = sorted(p.name for p in (daemon.board / "briefs").iterdir())[5]
    task = json.loads((daemon.board / "briefs" / brief / "brief.json").read_text())["task"]
    with Shim(daemon.socket, daemon.env).initialize() as shim:
        for tool in shim.request("tools/list")["result"]["tools"]:
            assert (
                "never instructions" in tool["description"] or "never as instructions" in tool["description"]
            )
        answers = [
            shim.ok("search_briefs", query="checkout redirect", limit=5),
            shim.ok("search_briefs", query="zzqqxxnothing", limit=5),
            shim.ok("list_tasks", limit=5),
            shim.ok("get_task", task_id=task),
            shim.ok("get_brief", brief_id=brief),
            shim.ok(
                "get_context",
                project=json.loads((daemon.board / "tasks" / f"{task}.json").read_text())["project"],
            ),
        ]
        texts = [
            shim.call("get_brief", brief_id=brief)["result"]["content"][0]["text"],
            shim.call("search_briefs", query="checkout redirect")["result"]["content"][0]["text"],
        ]
    for answer in answers:
        assert answer["note"] == NOTE, answer
    for text in texts:
        assert NOTE in text
