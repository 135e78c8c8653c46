"""``memoryd search`` covers what a person expects to find: briefs and memories, each under its own heading
(``--kind all``, the default), or one kind; through a real daemon with the real model, and in-process when
none runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from support.briefs import (
    SHIM,
    Shim,
    cli_env,
    memoryd,
    run_as_daemon_stops,
    wait_engine_ready,
    write_briefs,
)
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


SAMESITE = "Changed the session cookie SameSite from Strict to Lax on the /auth callback"


def test_a_hit_found_through_its_outcome_shows_that_outcome_and_a_short_brief_its_text_once(
    make_daemon, models_dir
):
    from memoryd.kinds.briefs.files import Outcome, render_outcome

    root = short_tmpdir()
    board, index = root / "board", root / "index"
    write_briefs(board, [BUTTON, REDIRECT])
    outcome = Outcome(did=("Added an e2e test for the expired session", SAMESITE), decided=("Keep Lax",))
    (board / "briefs" / "b-20261101-000001" / "outcome.md").write_text(
        render_outcome(outcome), encoding="utf-8"
    )
    daemon = make_daemon(root, board=board, index=index, model="", env={"MEMORYD_MODELS": str(models_dir)})
    daemon.start()
    wait_engine_ready(daemon)
    env = cli_env(root, board, index, daemon.socket) | {"MEMORYD_MODELS": str(models_dir)}
    with Shim(daemon.socket, daemon.env, tools="memories").initialize() as shim:
        assert shim.ok("store_memory", content=LESSON, tags=["web"], importance=10)["ok"]

    for via in ("(via daemon)", "(daemon not running: searched the board directly)"):
        found = memoryd(env, "search", "SameSite cookie", "--kind", "briefs")
        assert found.returncode == 0, found.stderr
        assert via in found.stdout and "in-process" not in found.stdout, found.stdout
        hit = found.stdout[found.stdout.index("b-20261101-000001") :]
        assert hit.splitlines()[1:3] == [f"      “{REDIRECT}”", f"      outcome: did: {SAMESITE}"], (
            found.stdout
        )
        assert found.stdout.count(REDIRECT) == 1, found.stdout

        # a memory's relevance (its score plus importance and recency) is shown on the briefs' 0-1 scale
        lessons = memoryd(
            env, "search", "login redirect loop middleware expired sessions", "--kind", "memories"
        )
        assert lessons.returncode == 0 and "clear the cookie first" in lessons.stdout, lessons.stderr
        listed = memoryd(env, "search", "login redirect loop middleware expired sessions", "--json")
        assert json.loads(listed.stdout)["memories"][0]["relevance"] > 1.0, listed.stdout
        assert lessons.stdout.splitlines()[1].startswith("1.00  "), lessons.stdout
        daemon.kill()


def _argv_bytes(env: dict, *args: bytes) -> subprocess.CompletedProcess:
    """``memoryd`` with raw argv bytes (what a terminal in a Latin-1 locale, or a script, may pass)."""
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"memoryd", *args],
        capture_output=True,
        env=env,
        cwd="/",
        timeout=120,
    )


def test_bad_queries_and_missing_boards_are_told_plainly_with_or_without_a_daemon(make_daemon):
    root = short_tmpdir()
    board, index = root / "board", root / "index"
    write_briefs(board, [REDIRECT])
    env = cli_env(root, board, index, root / "s.sock") | {"MEMORYD_MODEL": "none"}
    too_long = "redirect " * 120  # 1,080 characters: search_briefs takes 1,000

    def told(result, code: int, said: str) -> None:
        err = result.stderr if isinstance(result.stderr, str) else result.stderr.decode(errors="replace")
        assert result.returncode == code and said in err and "Traceback" not in err, (result.returncode, err)

    missing = memoryd(env, "search", "login", "--board", str(root / "nowhere"))
    told(missing, 1, f"board {root / 'nowhere'} does not exist")
    told(memoryd(env, "search", "login", "--board", str(board / "tasks" / "x.json")), 1, "board ")
    for daemon_up in (False, True):
        if daemon_up:
            make_daemon(root, board=board, index=index, model="none", socket_path=root / "s.sock").start()
        told(memoryd(env, "search", too_long), 2, "1,080 characters, more than the 1,000 allowed")
        told(_argv_bytes(env, b"search", b"login \xff\xfe"), 2, "not valid UTF-8")
        told(_argv_bytes(env, b"search", b"login", b"--project", b"\xff"), 2, "not valid UTF-8")
        for project in (" ", "p" * 101):
            told(memoryd(env, "search", "login", "--project", project), 2, "--project must name a project")
        fine = memoryd(env, "search", "login redirect", "--json")
        assert fine.returncode == 0 and json.loads(fine.stdout)["via"] == (
            "daemon" if daemon_up else "in-process"
        )
        # a terminal that cannot show Japanese or curly quotes gets "?" for them, not a traceback
        latin1 = memoryd(env | {"PYTHONIOENCODING": "latin-1"}, "search", "ログイン redirect")
        assert latin1.returncode == 0 and "Traceback" not in latin1.stderr, latin1.stderr
    # the daemon's board named through a symlink is the same board: no second index of it is built
    (root / "link").symlink_to(board)
    linked = memoryd(env, "search", "login redirect", "--json", "--board", str(root / "link"))
    assert linked.returncode == 0 and json.loads(linked.stdout)["via"] == "daemon", linked.stderr


@pytest.mark.parametrize("next_daemon", [False, True], ids=["none-after", "next-daemon"])
def test_a_search_meeting_a_stopping_daemon_answers_from_the_next_one_or_in_process(make_daemon, next_daemon):
    # A daemon stopping (or restarting) closes the connection or says "please retry": a transient state, which
    # the search rides out as a shim does, never an exit 1.
    root = short_tmpdir()
    board, index = root / "board", root / "index"
    write_briefs(board, [BUTTON, REDIRECT])
    env = cli_env(root, board, index, root / "s.sock")
    for round in range(2):
        daemon = make_daemon(root, board=board, index=index)
        daemon.start()
        wait_engine_ready(daemon)
        successor = make_daemon(root, board=board, index=index)

        def start_successor(daemon=daemon, successor=successor) -> None:  # as a shim or a service would
            deadline = time.monotonic() + 15
            while daemon.socket.exists() and time.monotonic() < deadline:  # the old one lets go of it
                time.sleep(0.02)
            successor.launch()

        found = run_as_daemon_stops(
            daemon,
            env,
            *("search", "login redirect loop", "--kind", "briefs", "--json"),
            then=start_successor if next_daemon else None,
        )
        assert found.returncode == 0, (round, found.stderr)
        answer = json.loads(found.stdout)
        assert answer["results"][0]["title"] == REDIRECT, answer
        assert "stopping or restarting" in found.stderr, found.stderr
        assert daemon.wait_exit(15) == 0
        if next_daemon:
            successor.wait_ready()
            successor.stop()


def test_a_search_whose_call_a_stopping_daemon_cancels_asks_again(make_daemon):
    # The call waits for an engine still loading a large board when the daemon is told to stop: the daemon
    # answers it "memoryd restarted; please retry", and the search asks again (here: no daemon follows).
    # The board is large enough that the engine is still loading when the daemon's drain of in-flight
    # calls ends (~1.3 s after the signal): 3,000 briefs loaded in ~1.9 s on a fast CPU, within it.
    root = short_tmpdir()
    board, index = root / "board", root / "index"
    write_briefs(board, [f"{REDIRECT} (case {n})" for n in range(9000)])
    daemon = make_daemon(root, board=board, index=index).launch()
    daemon.wait_ready()
    env = cli_env(root, board, index, daemon.socket)
    search = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "search", "login redirect loop", "--json", "--model", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/",
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while daemon.status()["sessions"] < 1 and time.monotonic() < deadline:  # its call is in flight
        time.sleep(0.02)
    time.sleep(0.5)
    assert daemon.status()["engine_state"] == "loading"  # the call still waits for the engine
    daemon.signal(signal.SIGTERM)
    out, err = search.communicate(timeout=120)
    assert search.returncode == 0, err
    assert "memoryd restarted; please retry" in err and "asking again" in err, err
    answer = json.loads(out)
    assert answer["via"] == "in-process" and REDIRECT in answer["results"][0]["title"], answer
