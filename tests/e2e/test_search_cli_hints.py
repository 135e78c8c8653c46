"""``memoryd search`` and ``memoryd tasks`` for a person who misspelt a project or whose words matched a later
line of a hit: the projects there are, and the line that matched; through a real daemon with the real model,
and in-process when none runs."""

from __future__ import annotations

import json

import pytest

from support.briefs import SHIM, Shim, cli_env, memoryd, wait_engine_ready, write_briefs
from support.daemon import short_tmpdir

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

CRASH = "The settings screen of the app freezes after rotating the phone"
APPENDED = "Also the login crash on Android 14 happens when the token refresh races the resume"
ENTITY = "Alice (person)\nWorks from Lisbon\nAlice owns the billing service"


def test_a_misspelt_project_names_the_projects_and_a_later_matching_line_is_shown(make_daemon, models_dir):
    root = short_tmpdir()
    board, index = root / "board", root / "index"
    write_briefs(board, [CRASH, "Make the login button colour a darker blue"])
    said = next((board / "briefs").glob("*/said.txt"))  # the first brief: CRASH
    said.write_text(f"{CRASH}\n{APPENDED}\n", encoding="utf-8")
    daemon = make_daemon(root, board=board, index=index, model="", env={"MEMORYD_MODELS": str(models_dir)})
    daemon.start()
    wait_engine_ready(daemon)
    env = cli_env(root, board, index, daemon.socket) | {"MEMORYD_MODELS": str(models_dir)}
    with Shim(daemon.socket, daemon.env, tools="memories").initialize() as shim:
        assert shim.ok("store_memory", content=ENTITY, tags=["people"], project="web")["ok"]

    for via in ("daemon", "in-process"):
        if via == "in-process":
            daemon.kill()
        missed = memoryd(env, "search", "login crash", "--project", "mobil")
        assert missed.returncode == 0, missed.stderr
        assert "projects on the board: web" in missed.stdout, (via, missed.stdout)
        assert "Projects with memories: web." in missed.stdout, (via, missed.stdout)
        answer = json.loads(memoryd(env, "search", "login crash", "--project", "mobil", "--json").stdout)
        assert answer["projects"] == ["web"] and answer["memories_projects"] == ["web"], (via, answer)

        crash = memoryd(env, "search", "login crash android")
        assert crash.returncode == 0, crash.stderr
        assert f"… {APPENDED}" in crash.stdout, (via, crash.stdout)
        owner = memoryd(env, "search", "who owns billing", "--kind", "memories")
        shown = "      Alice (person)…\n      … Alice owns the billing service"
        assert shown in owner.stdout, (via, owner.stdout)
        hits = json.loads(memoryd(env, "search", "who owns billing", "--json").stdout)["memories"]
        assert hits[0]["snippet"] == "Alice owns the billing service", (via, hits)

    tasks = memoryd(env, "tasks", "--project", "mobil")
    assert tasks.returncode == 0, tasks.stderr
    assert "0 tasks on" in tasks.stdout and "projects on the board: web" in tasks.stdout, tasks.stdout
    assert "projects on the board" not in memoryd(env, "tasks", "--project", "web").stdout


def test_tasks_without_a_project_read_no_project(tmp_path):
    board = tmp_path / "board"
    write_briefs(board, ["Tidy the notes folder"])
    task = next((board / "tasks").glob("*.json"))
    task.write_text(json.dumps({**json.loads(task.read_text()), "project": ""}))
    env = cli_env(tmp_path, board, tmp_path / "index", tmp_path / "none.sock")
    listed = memoryd(env, "tasks")
    assert listed.returncode == 0, listed.stderr
    assert "(no project) Tidy the notes folder" in listed.stdout and "[]" not in listed.stdout, listed.stdout
