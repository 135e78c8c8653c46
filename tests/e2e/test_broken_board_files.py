"""Broken board files, as a person meets them: a real daemon, files broken by hand while it runs, and the
real ``memoryd status`` / ``doctor`` / ``tasks`` commands.

Every record kind reports a file it cannot load at once (not only after a restart), by name and reason, and
forgets it once the file is fixed or removed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.briefs import Shim, assert_equivalent, wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir

TASK = "t-20261201-c0ffee"
BRIEF = "b-20261201-5eed42"
BROKEN_BRIEF = "b-20261202-abcdef"
BROKEN_TASK = "t-20261201-badbad"
PICKUP_S = 30.0  # catches a change never picked up; not a speed figure


def make_board(root: Path) -> Path:
    """Two tasks with one brief each, all readable."""
    board = root / "board"
    for task_id, brief_id, title in (
        (TASK, BRIEF, "Checkout double charge"),
        (BROKEN_TASK, "b-20261201-0b0b0b", "Login loop"),
    ):
        (board / "briefs" / brief_id).mkdir(parents=True)
        (board / "tasks").mkdir(exist_ok=True)
        task = {"id": task_id, "title": title, "project": "shopfront", "status": "open",
                "created_at": "2026-12-01T09:00:00Z"}  # fmt: skip
        brief = {"id": brief_id, "task": task_id, "project": "shopfront", "created_at": "2026-12-01T09:01:00Z",
                 "title": title, "summary": "A summary."}  # fmt: skip
        (board / "tasks" / f"{task_id}.json").write_text(json.dumps(task))
        (board / "briefs" / brief_id / "brief.json").write_text(json.dumps(brief))
        (board / "briefs" / brief_id / "said.txt").write_text(f"{title}: customers complain")
    (board / "sessions").mkdir()  # there from the start: a file added later is a change, not a new folder
    return board


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memoryd", *args], capture_output=True, text=True, timeout=120,
                          cwd="/", env={**os.environ, "HOME": os.environ["MEMORYD_HOME"]})  # fmt: skip


def status() -> dict:
    done = cli("status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def checks() -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(cli("doctor", "--json").stdout)["checks"]}


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + PICKUP_S
    while not predicate():
        assert time.monotonic() < deadline, f"not within {PICKUP_S} s: {what}; status: {status()}"
        time.sleep(0.3)


@pytest.fixture
def served(monkeypatch):
    root = short_tmpdir()
    memoryd_home = root / "mh"
    monkeypatch.setenv("MEMORYD_HOME", str(memoryd_home))
    (memoryd_home / "h").mkdir(parents=True)
    daemon = DaemonProcess(root, socket_path=memoryd_home / "state" / "memoryd.sock", board=make_board(root))
    try:
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def break_files(board: Path) -> dict[str, str]:
    """One broken file of each kind, written while the daemon runs: board path -> a word of its reason."""
    memory = "0" * 64
    (board / "memories").mkdir(exist_ok=True)
    (board / "memories" / f"{memory}.md").write_text("---\ntags: [unclosed\n---\nbody\n")
    (board / "memories" / "notes.md").write_text("not a memory\n")
    (board / "tasks" / f"{BROKEN_TASK}.json").write_text('{"id": "' + BROKEN_TASK + '", ')
    (board / "briefs" / BROKEN_BRIEF).mkdir()
    (board / "briefs" / BROKEN_BRIEF / "said.txt").write_text("hello there")
    (board / "briefs" / BROKEN_BRIEF / "brief.json").write_text('{"id": "' + BROKEN_BRIEF + '", "task": ')
    (board / "briefs" / BRIEF / "outcome.md").write_bytes(b"## Did\n- caf\xe9\n")
    return {
        f"memories/{memory}.md": "YAML",
        "memories/notes.md": "name",
        f"tasks/{BROKEN_TASK}.json": "JSON",
        f"briefs/{BROKEN_BRIEF}/brief.json": "JSON",
        f"briefs/{BRIEF}/outcome.md": "UTF-8",
    }


def test_files_broken_while_the_daemon_runs_are_reported_at_once_and_forgotten_once_fixed(served):
    board = served.board
    broken = break_files(board)
    wait_for(lambda: status()["skipped_files"] == len(broken), "every broken file counted")
    shown = {s["path"]: s["reason"] for s in status()["skipped"]}
    assert shown.keys() == broken.keys(), shown
    for path, word in broken.items():
        assert word in shown[path], (path, shown[path])
    text = cli("status")
    assert "5 files skipped:" in text.stdout and all(f"{p}: " in text.stdout for p in broken), text.stdout
    # a brief folder whose brief.json is broken is a board file to fix, not an index behind the board
    found = checks()
    assert found["index"]["state"] == "ok", found["index"]
    assert found["board files"]["state"] == "problem"
    assert f"briefs/{BROKEN_BRIEF}/brief.json" in found["board files"]["detail"]

    shutil.rmtree(board / "memories")
    shutil.rmtree(board / "briefs" / BROKEN_BRIEF)
    (board / "briefs" / BRIEF / "outcome.md").unlink()
    task = {"id": BROKEN_TASK, "title": "Login loop", "project": "shopfront", "status": "open",
            "created_at": "2026-12-01T09:00:00Z"}  # fmt: skip
    (board / "tasks" / f"{BROKEN_TASK}.json").write_text(json.dumps(task))
    wait_for(lambda: status()["skipped_files"] == 0, "every fixed or removed file forgotten")
    assert status()["tasks"] == 2
    assert "board files" not in checks()


def test_a_misnamed_entry_in_briefs_or_tasks_is_reported_while_it_exists(served):
    board = served.board
    (board / "briefs" / "junk").mkdir()
    (board / "tasks" / "README.txt").write_text("my notes\n")
    (board / "tasks" / ".hidden.json").write_text("{")  # dot files are not board files: never reported
    wait_for(lambda: status()["skipped_files"] == 2, "both misnamed entries counted")
    assert {s["path"] for s in status()["skipped"]} == {"briefs/junk", "tasks/README.txt"}
    (board / "briefs" / "junk").rmdir()
    (board / "tasks" / "README.txt").unlink()
    wait_for(lambda: status()["skipped_files"] == 0, "removed entries forgotten")


def test_list_tasks_counts_and_names_the_task_files_it_could_not_read(served):
    """The MCP tool says what `memoryd tasks` and status say: which task files are missing from the list."""
    board = served.board
    with Shim(served.socket, served.env).initialize() as shim:
        whole = shim.ok("list_tasks")
        assert whole["total"] == 2 and whole["skippedFiles"] == 0 and "skipped" not in whole, whole
        (board / "tasks" / f"{BROKEN_TASK}.json").write_text('{"id": "' + BROKEN_TASK + '", ')
        (board / "tasks" / "README.txt").write_text("my notes\n")
        wait_for(lambda: status()["skipped_files"] == 2, "both task files counted")
        answer = shim.ok("list_tasks")
        assert [t["task_id"] for t in answer["tasks"]] == [TASK] and answer["total"] == 1, answer
        assert answer["skippedFiles"] == 2, answer
        named = {s["path"]: s["reason"] for s in answer["skipped"]}
        assert named.keys() == {f"tasks/{BROKEN_TASK}.json", "tasks/README.txt"}, named
        assert "JSON" in named[f"tasks/{BROKEN_TASK}.json"] and "name" in named["tasks/README.txt"], named
        text = shim.call("list_tasks")["result"]["content"][0]["text"]
        assert_equivalent(answer, text)
        assert "2 task files could not be read" in text, text
        (board / "tasks" / "README.txt").unlink()
        task = {"id": BROKEN_TASK, "title": "Login loop", "project": "shopfront", "status": "open",
                "created_at": "2026-12-01T09:00:00Z"}  # fmt: skip
        (board / "tasks" / f"{BROKEN_TASK}.json").write_text(json.dumps(task))
        wait_for(lambda: status()["skipped_files"] == 0, "both forgotten")
        fixed = shim.ok("list_tasks")
        assert fixed["total"] == 2 and fixed["skippedFiles"] == 0 and "skipped" not in fixed, fixed


def test_list_tasks_and_get_task_name_the_brief_files_they_could_not_read(served):
    """A broken brief's task is not known: both tools say the picture may miss briefs, and which files."""
    board = served.board
    with Shim(served.socket, served.env).initialize() as shim:
        assert shim.ok("list_tasks")["skippedBriefFiles"] == 0
        whole = shim.ok("get_task", task_id=TASK)
        assert whole["skippedBriefFiles"] == 0 and "skippedBriefs" not in whole, whole
        (board / "briefs" / BROKEN_BRIEF).mkdir()
        (board / "briefs" / BROKEN_BRIEF / "brief.json").write_text('{"id": "' + BROKEN_BRIEF + '", "task": ')
        wait_for(lambda: status()["skipped_files"] == 1, "the broken brief counted")
        for tool, args in (("list_tasks", {}), ("get_task", {"task_id": TASK})):
            answer = shim.ok(tool, **args)
            assert answer["skippedBriefFiles"] == 1, answer
            [named] = answer["skippedBriefs"]
            assert named["path"] == f"briefs/{BROKEN_BRIEF}/brief.json" and "JSON" in named["reason"], named
            text = shim.call(tool, **args)["result"]["content"][0]["text"]
            assert (
                "1 brief file could not be read" in text and f"briefs/{BROKEN_BRIEF}/brief.json: " in text
            ), text
        assert shim.ok("list_tasks")["skippedFiles"] == 0  # task files are all readable
        shutil.rmtree(board / "briefs" / BROKEN_BRIEF)
        wait_for(lambda: status()["skipped_files"] == 0, "the removed brief forgotten")
        assert "skippedBriefs" not in shim.ok("get_task", task_id=TASK)


def test_save_outcome_for_a_brief_whose_brief_json_is_broken_keeps_it_and_says_it_is_not_searchable(served):
    """The report is kept on the board (it is indexed with its brief once brief.json is fixed), but the
    answer never claims it is searchable while the brief cannot be read."""
    board = served.board
    (board / "briefs" / BROKEN_BRIEF).mkdir()
    (board / "briefs" / BROKEN_BRIEF / "brief.json").write_text('{"id": "' + BROKEN_BRIEF + '", "task": ')
    wait_for(lambda: status()["skipped_files"] == 1, "the broken brief counted")
    with Shim(served.socket, served.env).initialize() as shim:
        saved = shim.ok("save_outcome", brief_id=BROKEN_BRIEF, did=["fixed the zqbroken redirect"], open=[])
        assert saved["searchable"] is False, saved
        text = shim.call("save_outcome", brief_id=BROKEN_BRIEF, did=["fixed the zqbroken redirect"], open=[])
        words = text["result"]["content"][0]["text"]
        assert "searchable now" not in words and f"briefs/{BROKEN_BRIEF}/brief.json" in words, words
        assert "JSON" in words, words
        assert (board / "briefs" / BROKEN_BRIEF / "outcome.md").exists()
        assert shim.ok("search_briefs", query="zqbroken")["results"] == []
        again = shim.ok("save_outcome", brief_id=BRIEF, did=["a readable brief"], open=[])
        assert again["searchable"] is True, again


def test_a_lone_surrogate_escape_in_a_brief_or_task_file_is_a_broken_file_not_a_failed_engine(monkeypatch):
    """``"\\udc80"`` is valid JSON but no text (UTF-8 cannot encode it): such a brief.json or task file is
    skipped and named like any broken file, at start and when written while the daemon runs; the rest of
    the board is served and exported."""
    root = short_tmpdir()
    monkeypatch.setenv("MEMORYD_HOME", str(root / "mh"))
    board = make_board(root)
    brief = json.loads((board / "briefs" / BRIEF / "brief.json").read_text())
    text = json.dumps({**brief, "title": "Checkout zqsurrogate"}).replace(
        "zqsurrogate", "\\udc80 zqsurrogate"
    )
    (board / "briefs" / BRIEF / "brief.json").write_text(text)
    daemon = DaemonProcess(root, socket_path=root / "mh" / "state" / "memoryd.sock", board=board)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        wait_for(lambda: status()["skipped_files"] == 1, "the brief with a lone surrogate counted")
        [skipped] = status()["skipped"]
        assert skipped["path"] == f"briefs/{BRIEF}/brief.json" and "surrogate" in skipped["reason"], skipped
        task = json.loads((board / "tasks" / f"{BROKEN_TASK}.json").read_text())
        raw = json.dumps({**task, "project": "shop"}).replace('"shop"', '"sh\\ud800op"')
        (board / "tasks" / f"{BROKEN_TASK}.json").write_text(raw)  # while it runs
        wait_for(lambda: status()["skipped_files"] == 2, "the task with a lone surrogate counted")
        with Shim(daemon.socket, daemon.env, tools="all").initialize() as shim:
            assert [t["task_id"] for t in shim.ok("list_tasks")["tasks"]] == [TASK]
            assert "Exported to" in shim.call("export_database")["result"]["content"][0]["text"]
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def _session_docs(word: str, mark: str) -> tuple[dict, dict, dict]:
    """A session line whose prompt holds ``mark`` (where a test puts what breaks it), a good line beside it,
    and the session's summary (``mark`` in its text), each with ``word`` to be found by."""
    line = {"id": "mem_2026-12-01T09:00:00.000Z_a1b2c3", "sessionId": "sess-1", "type": "agent-interaction",
            "timestamp": "2026-12-01T09:00:00.000Z", "prompt": f"{word}line {mark}".rstrip(), "thought": "t",
            "response": "r"}  # fmt: skip
    good = {**line, "id": "mem_2026-12-01T09:01:00.000Z_d4e5f6", "prompt": f"{word}good plain"}
    summary = {"id": "summary_sess-1", "sessionId": "sess-1", "timestamp": "2026-12-01T09:02:00.000Z",
               "title": "t", "summary": f"{word}sum {mark}".rstrip(), "category": "other", "memoryCount": 2}  # fmt: skip
    return line, good, summary


def test_a_lone_surrogate_escape_in_a_session_file_is_skipped_not_a_failed_engine(monkeypatch):
    """A session line or summary holding ``"\\ud800"``: the line is skipped (the file's other lines are
    served) and the summary is a broken file, named; the engine starts."""
    root = short_tmpdir()
    monkeypatch.setenv("MEMORYD_HOME", str(root / "mh"))
    board = make_board(root)
    line, good, summary = _session_docs("zqsur", "SUR")
    lines = [json.dumps(line).replace("SUR", "\\ud800"), json.dumps(good)]
    (board / "sessions" / "sess-1.jsonl").write_text("\n".join(lines) + "\n")
    (board / "sessions" / "sess-1.summary.json").write_text(json.dumps(summary).replace("SUR", "\\udc00"))
    daemon = DaemonProcess(root, socket_path=root / "mh" / "state" / "memoryd.sock", board=board)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        shown = {s["path"]: s["reason"] for s in status()["skipped"]}
        assert shown.keys() == {"sessions/sess-1.jsonl", "sessions/sess-1.summary.json"}, shown
        assert "surrogate" in shown["sessions/sess-1.summary.json"], shown
        with Shim(daemon.socket, daemon.env, tools="sessions").initialize() as shim:
            text = shim.call("get_session_memories", sessionId="sess-1")["result"]["content"][0]["text"]
            assert "zqsurgood" in text and "1 broken line" in text, text
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_json_the_parser_cannot_convert_is_a_broken_file_not_a_failed_engine(monkeypatch):
    """Valid JSON that Python will not read: a number of 5,000 digits (past ``int``'s digit limit) or
    arrays nested 100,000 deep. A session line holding one is skipped (the file's other lines are
    served), a summary or task file is a broken file named with its reason; the engine starts."""
    root = short_tmpdir()
    monkeypatch.setenv("MEMORYD_HOME", str(root / "mh"))
    board = make_board(root)
    line, good, summary = _session_docs("zqdig", "")
    digits = "9" * 5000
    lines = [
        json.dumps({**line, "memoryCount": 0}).replace('"memoryCount": 0', f'"n": {digits}'),
        json.dumps(good),
    ]
    (board / "sessions" / "sess-1.jsonl").write_text("\n".join(lines) + "\n")
    (board / "sessions" / "sess-1.summary.json").write_text(json.dumps({**summary, "memoryCount": 0}).replace(
        '"memoryCount": 0', f'"memoryCount": {digits}'))  # fmt: skip
    task = json.loads((board / "tasks" / f"{BROKEN_TASK}.json").read_text())
    (board / "tasks" / f"{BROKEN_TASK}.json").write_text(
        json.dumps({**task, "deep": 0}).replace('"deep": 0', '"deep": ' + "[" * 100_000 + "]" * 100_000)
    )
    daemon = DaemonProcess(root, socket_path=root / "mh" / "state" / "memoryd.sock", board=board)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        shown = {s["path"]: s["reason"] for s in status()["skipped"]}
        assert shown.keys() == {
            "sessions/sess-1.jsonl",
            "sessions/sess-1.summary.json",
            f"tasks/{BROKEN_TASK}.json",
        }, shown
        assert "line 1" in shown["sessions/sess-1.jsonl"], shown
        assert "too long" in shown["sessions/sess-1.summary.json"], shown
        assert "nested too deeply" in shown[f"tasks/{BROKEN_TASK}.json"], shown
        with Shim(daemon.socket, daemon.env, tools="sessions").initialize() as shim:
            text = shim.call("get_session_memories", sessionId="sess-1")["result"]["content"][0]["text"]
            assert "zqdiggood" in text and "1 broken line" in text, text
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_get_brief_names_the_files_of_the_brief_it_could_not_read(served):
    """A said.txt that is not UTF-8 or an outcome.md too large: get_brief says which of its files could
    not be read instead of answering 'nothing recorded' and 'none saved yet' as if they were absent."""
    folder = served.board / "briefs" / BRIEF
    (folder / "said.txt").write_bytes(b"\xff\xfe what was said")
    (folder / "outcome.md").write_bytes(b"## Did\n- caf\xe9\n")
    wait_for(lambda: status()["skipped_files"] == 2, "both broken files counted")
    with Shim(served.socket, served.env).initialize() as shim:
        answer = shim.ok("get_brief", brief_id=BRIEF)
        assert answer["skippedBriefFiles"] == 2, answer
        assert {s["path"] for s in answer["skippedBriefs"]} == {
            f"briefs/{BRIEF}/said.txt",
            f"briefs/{BRIEF}/outcome.md",
        }, answer
        text = shim.call("get_brief", brief_id=BRIEF)["result"]["content"][0]["text"]
        assert f"briefs/{BRIEF}/said.txt: " in text and "could not be read" in text, text
        other = shim.ok("get_brief", brief_id="b-20261201-0b0b0b")  # the other brief: nothing skipped
        assert other["skippedBriefFiles"] == 0 and "skippedBriefs" not in other, other


def test_a_file_where_the_sessions_folder_should_be_is_skipped_like_any_kinds_folder(monkeypatch):
    """``sessions`` that is a file (or a symlink) is refused by the gate: named as a skipped entry, as a
    file in place of ``tasks``, ``briefs`` or ``memories`` is, while the rest of the board is served; it
    failed the whole engine."""
    root = short_tmpdir()
    monkeypatch.setenv("MEMORYD_HOME", str(root / "mh"))
    board = make_board(root)
    (board / "sessions").rmdir()
    (board / "sessions").write_text("not a folder\n")
    daemon = DaemonProcess(root, socket_path=root / "mh" / "state" / "memoryd.sock", board=board)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        assert status()["skipped"] == [{"path": "sessions", "reason": "regular file"}], status()
        with Shim(daemon.socket, daemon.env, tools="all").initialize() as shim:
            assert len(shim.ok("list_tasks")["tasks"]) == 2
            health = shim.ok("healthcheck")
            assert health["status"] == "degraded" and "sessions (regular file)" in health["problems"][0], (
                health
            )
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_healthcheck_memory_stats_and_get_all_summaries_name_the_files_they_could_not_read(served):
    """A broken file is no healthy board: the health answer lists it as a problem, and the counts name it."""
    board = served.board
    with Shim(served.socket, served.env, tools="sessions,memories").initialize() as shim:
        healthy = shim.ok("healthcheck")
        assert healthy["problems"] == [] and "skipped" not in healthy, healthy
        broken = break_files(board)
        summary = "sessions/s-broken.summary.json"
        (board / summary).write_text('{"title": ')
        broken[summary] = "JSON"
        wait_for(lambda: status()["skipped_files"] == len(broken), "every broken file counted")
        health = shim.ok("healthcheck")
        assert health["status"] == "degraded" and health["skipped_files"] == len(broken), health
        assert {s["path"] for s in health["skipped"]} <= broken.keys() and len(health["skipped"]) == 5, health
        [problem] = health["problems"]
        assert problem.startswith(f"{len(broken)} board files could not be read") and "1 more" in problem, (
            problem
        )
        text = shim.call("healthcheck")["result"]["content"][0]["text"]
        assert text.startswith("memoryd is DEGRADED: 6 board files could not be read"), text

        stats = shim.ok("memory_stats")["result"]
        assert stats["skippedFiles"] == 2, stats
        named = {s["path"]: s["reason"] for s in stats["skipped"]}
        assert named.keys() == {p for p in broken if p.startswith("memories/")}, named
        assert "YAML" in named[f"memories/{'0' * 64}.md"], named

        summaries = shim.ok("get_all_summaries")
        assert summaries["skippedFiles"] == 1 and summaries["skipped"][0]["path"] == summary, summaries
        assert "JSON" in summaries["skipped"][0]["reason"], summaries
        text = shim.call("get_all_summaries")["result"]["content"][0]["text"]
        assert "1 summary file(s) could not be read" in text and f"{summary}: " in text, text


def test_a_misnamed_entry_in_sessions_is_reported_while_it_exists(served):
    sessions = served.board / "sessions"
    (sessions / "notes.txt").write_text("my notes\n")
    (sessions / "old").mkdir()
    (sessions / ".hidden.jsonl").write_text("{")  # dot, temp and editor files are no board files
    (sessions / "s1.jsonl~").write_text("{")
    wait_for(lambda: status()["skipped_files"] == 2, "both misnamed entries counted")
    shown = {s["path"]: s["reason"] for s in status()["skipped"]}
    assert shown.keys() == {"sessions/notes.txt", "sessions/old"}, shown
    assert all("name is not <session-id>.jsonl" in reason for reason in shown.values()), shown
    assert "sessions/notes.txt" in checks()["board files"]["detail"]
    (sessions / "notes.txt").unlink()
    (sessions / "old").rmdir()
    wait_for(lambda: status()["skipped_files"] == 0, "removed entries forgotten")


def test_a_misnamed_session_file_is_warned_about_once_while_it_stays(monkeypatch):
    """There at the start, it is one warning in the log, not one per reload of the folder (a moved folder,
    a rescan), while status keeps naming it."""
    root = short_tmpdir()
    board = make_board(root)
    (board / "sessions" / "notes.txt").write_text("my notes\n")
    memoryd_home = root / "mh"
    monkeypatch.setenv("MEMORYD_HOME", str(memoryd_home))
    daemon = DaemonProcess(root, socket_path=memoryd_home / "state" / "memoryd.sock", board=board)
    try:
        daemon.start()
        wait_engine_ready(daemon)

        def warned() -> list[dict]:
            return [e for e in daemon.events("board.file_skipped") if e.get("path") == "sessions/notes.txt"]

        assert len(warned()) == 1, daemon.log()
        (board / "sessions").rename(board / "s-moved")  # the folder moved away and back: a full reload,
        line = {"id": "i1", "sessionId": "s1", "timestamp": "2026-12-01T09:00:00Z", "prompt": "zebra crossing",
                "thought": "", "response": "ok"}  # fmt: skip
        (board / "s-moved" / "s1.jsonl").write_text(json.dumps(line) + "\n")  # which this session shows
        (board / "s-moved").rename(board / "sessions")
        with Shim(daemon.socket, daemon.env, tools="sessions").initialize() as shim:
            wait_for(
                lambda: shim.ok("query_raw_memories", query="zebra crossing")["count"] == 1, "the reload"
            )
        assert len(warned()) == 1, daemon.log()
        assert "sessions/notes.txt" in {s["path"] for s in status()["skipped"]}
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_doctor_without_a_daemon_names_a_misnamed_session_file(tmp_path, monkeypatch):
    """A full load of the board (as at a daemon's start) reports what the running daemon reports."""
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "mh"))
    monkeypatch.setenv("MEMORYD_BOARD", str(make_board(tmp_path)))
    (tmp_path / "board" / "sessions" / "notes.txt").write_text("my notes\n")
    check = checks()["board files"]
    assert check["state"] == "problem" and "sessions/notes.txt" in check["detail"], check


def test_doctor_without_a_daemon_reads_the_board_and_names_each_broken_file(tmp_path, monkeypatch):
    """No daemon runs: doctor does not say "all good" about a board a daemon would skip files of."""
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "mh"))
    monkeypatch.setenv("MEMORYD_BOARD", str(make_board(tmp_path)))
    assert checks()["board files"]["state"] == "ok"
    broken = break_files(tmp_path / "board")
    done = cli("doctor", "--json")
    assert done.returncode == 1, done.stdout
    check = {c["name"]: c for c in json.loads(done.stdout)["checks"]}["board files"]
    assert check["state"] == "problem" and check["detail"].startswith("5 files"), check
    for path in broken:
        assert path in check["detail"], (path, check)
    assert check["fix"] == "fix or remove each file listed above" and check["command"] is None
    assert "daemon" not in {c["name"] for c in json.loads(done.stdout)["checks"] if c["state"] == "problem"}


def test_memoryd_tasks_says_which_task_files_could_not_be_read(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "mh"))
    monkeypatch.setenv("MEMORYD_BOARD", str(make_board(tmp_path)))
    whole = cli("tasks")
    assert whole.returncode == 0 and whole.stdout.startswith("2 tasks"), whole
    (tmp_path / "board" / "tasks" / f"{BROKEN_TASK}.json").write_text('{"id": "' + BROKEN_TASK + '", ')
    done = cli("tasks")
    assert done.returncode == 1, done
    assert done.stdout.startswith("1 task on") and TASK in done.stdout and BROKEN_TASK not in done.stdout
    assert "1 task file could not be read" in done.stderr, done.stderr
    assert f"tasks/{BROKEN_TASK}.json: bad JSON" in done.stderr, done.stderr
    assert done.stderr.count(f"tasks/{BROKEN_TASK}.json") == 1, done.stderr  # said once, not also logged
    assert_sentences("memoryd tasks", done.stderr)


def assert_sentences(prog: str, stderr: str) -> None:
    """What a CLI command writes on stderr is sentences for a person, never JSON log lines."""
    for line in stderr.splitlines():
        assert line.startswith((f"{prog}: ", "  ", "(")) and not line.lstrip().startswith("{"), stderr


def test_cli_commands_say_broken_board_files_in_sentences_not_json_log_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "mh"))
    monkeypatch.setenv("MEMORYD_BOARD", str(make_board(tmp_path)))
    break_files(tmp_path / "board")
    found = cli("search", "customers complain", "--model", "none")  # no daemon: searches in-process
    assert found.returncode == 0 and TASK in found.stdout, found
    assert_sentences("memoryd search", found.stderr)
    assert f"memoryd search: skipped tasks/{BROKEN_TASK}.json: bad JSON" in found.stderr, found.stderr
    doctor = cli("doctor")
    assert "5 files on" in doctor.stdout, doctor.stdout
    assert doctor.stderr == "", doctor.stderr  # the board files check names them: no line besides
