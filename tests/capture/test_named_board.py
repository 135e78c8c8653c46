"""A board named by ``MEMORYD_BOARD`` while a daemon serving another board runs on the socket: ``memoryd
brief``, ``search`` and ``tasks`` work on the named board, as with ``--board``, and say where they went."""

from __future__ import annotations

import json
import shutil

from support.briefs import cli_env, memoryd, wait_engine_ready
from support.daemon import short_tmpdir

TEXT = "Fix the checkout button colour on the payment page of the shopfront"


def test_memoryd_board_names_the_board_even_while_a_daemon_serves_another(make_daemon):
    root = short_tmpdir()
    try:
        served, named = root / "served", root / "named"
        daemon = make_daemon(root, board=served, index=root / "served-index").start()
        wait_engine_ready(daemon)
        env = cli_env(root, named, root / "named-index", daemon.socket)
        del env["MEMORYD_INDEX"]  # the variable alone names the board, as --board does

        filed = memoryd(env, "brief", TEXT, "--project", "shop")
        assert filed.returncode == 0, filed.stderr
        brief = filed.stdout.strip()
        assert (named / "briefs" / brief / "brief.json").is_file(), filed.stderr
        assert not (served / "briefs" / brief).exists()
        assert f"serves {served}" in filed.stderr and f"board {named}" in filed.stderr, filed.stderr
        task = json.loads((named / "briefs" / brief / "brief.json").read_text())["task"]
        assert f'task {task} ("{TEXT}", a new task)' in filed.stderr, filed.stderr

        found = memoryd(env, "search", "checkout button colour", "--kind", "briefs", "--json")
        assert found.returncode == 0, found.stderr
        answer = json.loads(found.stdout)
        assert answer["via"] == "in-process" and answer["board"] == str(named), answer
        assert f"serves {served}" in found.stderr, found.stderr

        listed = memoryd(env, "tasks")
        assert listed.returncode == 0 and task in listed.stdout and str(named) in listed.stdout, listed
        assert memoryd(env, "tasks", "done", task).returncode == 0
        assert json.loads((named / "tasks" / f"{task}.json").read_text())["status"] == "done"

        # the daemon's own board, named, still goes through the daemon and is not called out as another
        own = cli_env(root, served, root / "served-index", daemon.socket)
        through = memoryd(own, "brief", TEXT, "--project", "shop")
        assert through.returncode == 0 and "serves" not in through.stderr, through.stderr
        assert (served / "briefs" / through.stdout.strip()).is_dir()
    finally:
        shutil.rmtree(root, ignore_errors=True)
