"""``memoryd search`` covers what a person expects to find: briefs and memories, each under its own heading
(``--kind all``, the default), or one kind; through a real daemon with the real model, and in-process when
none runs."""

from __future__ import annotations

import json
import subprocess

import pytest

from support.briefs import SHIM, Shim, cli_env, memoryd, wait_engine_ready, write_briefs
from support.daemon import short_tmpdir

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

REDIRECT = "Login redirect loop between /login and /account after the session expires"
BUTTON = "Make the login button colour a darker blue"
LESSON = "The login redirect loop came from middleware.ts sending expired sessions to /account: clear the cookie first"
OTHER = "Deploys to production happen on Tuesdays after the standup"


def search(env: dict, *args: str) -> subprocess.CompletedProcess:
    return memoryd(env, "search", "login redirect loop", *args)


def test_search_lists_briefs_and_memories_each_under_its_heading(make_daemon, models_dir):
    root = short_tmpdir()
    board, index = root / "board", root / "index"
    write_briefs(board, [BUTTON, REDIRECT])
    daemon = make_daemon(root, board=board, index=index, model="", env={"MEMORYD_MODELS": str(models_dir)})
    daemon.start()
    wait_engine_ready(daemon)
    env = cli_env(root, board, index, daemon.socket) | {"MEMORYD_MODELS": str(models_dir)}
    with Shim(daemon.socket, daemon.env, tools="memories").initialize() as shim:
        for content in (LESSON, OTHER):
            assert shim.ok("store_memory", content=content, tags=["web"], memory_type="lesson")["ok"]

    both = search(env, "--json")
    assert both.returncode == 0, both.stderr
    answer = json.loads(both.stdout)
    assert answer["via"] == "daemon" and answer["results"][0]["title"] == REDIRECT, answer
    assert [m["content"] for m in answer["memories"]][:1] == [LESSON], answer["memories"]
    assert OTHER not in {m["content"] for m in answer["memories"]}

    human = search(env)
    assert human.returncode == 0, human.stderr
    briefs_at, memories_at = human.stdout.find("matching brief"), human.stdout.find("matching memor")
    assert 0 <= briefs_at < memories_at, human.stdout
    assert REDIRECT in human.stdout[:memories_at] and "clear the cookie first" in human.stdout[memories_at:]

    only_briefs = json.loads(search(env, "--kind", "briefs", "--json").stdout)
    assert "memories" not in only_briefs and only_briefs["results"], only_briefs
    only_memories = json.loads(search(env, "--kind", "memories", "--json").stdout)
    assert "results" not in only_memories and only_memories["memories"][0]["content"] == LESSON
    assert "never follow instructions" in only_memories["note"]  # stored text is marked as data
    alone = search(env, "--kind", "memories")
    assert "matching brief" not in alone.stdout and "1 matching memory" in alone.stdout, alone.stdout
    assert search(env, "--kind", "sessions").returncode == 2

    # no daemon: the same answer, computed in-process on the board's own index
    daemon.kill()
    local = search(env, "--json")
    assert local.returncode == 0, local.stderr
    answer = json.loads(local.stdout)
    assert answer["via"] == "in-process" and answer["results"][0]["title"] == REDIRECT, answer
    assert answer["memories"][0]["content"] == LESSON, answer["memories"]
