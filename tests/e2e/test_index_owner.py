"""One writer per index, one board per index (:mod:`memoryd.index.lock`), with real daemons.

* ``memoryd search --board OTHER`` while a daemon serves the default board searches OTHER's own index and
  leaves the live one as it was: same rows on disk, nothing re-added at the daemon's next start.
* a second ``memoryd serve`` of another board on the same ``--index`` is refused (exit 4) naming the
  owner's pid and board; the first keeps serving. An index built from another board is refused (exit 1)
  even when nobody holds it, instead of having every row deleted.
* without ``--index`` each board has its own index: serving X, then Y, then X again embeds nothing the
  third time (the real model: its ``index_backfilled`` counts).
* an in-process search whose index a daemon of that board writes goes to that daemon.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from memoryd.errors import EXIT_ALREADY_RUNNING, EXIT_STARTUP_FAILED  # noqa: E402
from support.board import write_brief, write_task  # noqa: E402
from support.briefs import wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir
from support.privacy import poll, run_memoryd


@pytest.fixture
def root():
    """A short folder for one test's homes, boards and indexes (removed after its daemons are killed)."""
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_board(board: Path, word: str, n: int) -> list[str]:
    """A board of ``n`` briefs whose said text carries ``word``; returns their ids."""
    (board / "tasks").mkdir(parents=True)
    task = f"t-20260101-{word[:3].encode().hex()}"
    write_task(board, task, title=f"{word} work")
    ids = []
    for i in range(n):
        brief = f"b-20260101-{word[:2].encode().hex()}{i:02x}"
        write_brief(board, brief, task, said=f"the {word} widget number {i} is broken", title=f"{word} {i}")
        ids.append(brief)
    return ids


def table_ids(index: Path) -> list[str]:
    """The record ids in the index's table on disk, read with LanceDB itself (nothing of ours)."""
    import lancedb

    return sorted(lancedb.connect(str(index)).open_table("records").to_arrow().column("id").to_pylist())


def exit_code(daemon: DaemonProcess, timeout: float = 60.0) -> int | None:
    """The daemon's exit code, or ``None`` when it is still running after ``timeout`` s (it was not refused)."""
    try:
        return daemon.wait_exit(timeout)
    except subprocess.TimeoutExpired:
        return None


def stop(daemon: DaemonProcess) -> None:
    daemon.signal(signal.SIGTERM)
    assert daemon.wait_exit(30) == 0, daemon.log()


def search_json(env: dict[str, str], *argv: str) -> dict:
    done = run_memoryd(env, "search", *argv, "--json", "--model", "none")
    assert done.returncode == 0, f"{done.returncode}:\n{done.stdout}\n{done.stderr}"
    return {**json.loads(done.stdout), "stderr": done.stderr}


def test_search_of_another_board_leaves_the_live_index_alone(root, make_daemon):
    home = root / "home"
    live_board, live_index = home / "data" / "board", home / "data" / "index"  # the default locations
    live = make_board(live_board, "quillfeather", 3)
    other_board = root / "other"
    other = make_board(other_board, "marblefinch", 2)
    daemon = make_daemon(root, board=live_board, index=live_index).start()
    wait_engine_ready(daemon)
    assert table_ids(live_index) == live

    answer = search_json(
        daemon.env, "marblefinch", "--board", str(other_board), "--socket", str(daemon.socket)
    )
    assert table_ids(live_index) == live  # the live table on disk keeps its rows
    assert sorted(r["brief_id"] for r in answer["results"]) == other  # answered from OTHER
    assert answer["via"] == "in-process" and answer["board"] == str(other_board)
    ours = search_json(daemon.env, "quillfeather", "--socket", str(daemon.socket))
    assert ours["via"] == "daemon" and sorted(r["brief_id"] for r in ours["results"]) == live

    stop(daemon)
    again = make_daemon(root, board=live_board, index=live_index).start()
    wait_engine_ready(again)
    reconciled = again.events("board_reconciled")[-1]
    assert {k: reconciled[k] for k in ("added", "updated", "deleted", "unchanged")} == {
        "added": 0,
        "updated": 0,
        "deleted": 0,
        "unchanged": 3,
    }


def test_a_second_daemon_of_another_board_on_the_same_index_is_refused(root, make_daemon):
    index = root / "index"
    first_ids = make_board(root / "b1", "gondolier", 3)
    make_board(root / "b2", "tessellate", 2)
    first = make_daemon(root, board=root / "b1", index=index).start()
    wait_engine_ready(first)

    second = make_daemon(root, board=root / "b2", index=index, socket_path=root / "t.sock").launch()
    assert exit_code(second) == EXIT_ALREADY_RUNNING, second.log()
    refusal = second.log()
    assert f"the index {index} is owned by memoryd serve (pid {first.proc.pid})" in refusal
    assert f"serving board {root / 'b1'}" in refusal
    assert not (root / "t.sock").exists()

    assert table_ids(index) == first_ids
    answer = search_json(first.env, "gondolier", "--socket", str(first.socket))
    assert answer["via"] == "daemon" and sorted(r["brief_id"] for r in answer["results"]) == first_ids


def test_an_index_built_from_another_board_is_refused_not_emptied(root, make_daemon):
    index = root / "index"
    first_ids = make_board(root / "b1", "gondolier", 3)
    make_board(root / "b2", "tessellate", 2)
    first = make_daemon(root, board=root / "b1", index=index).start()
    wait_engine_ready(first)
    stop(first)

    second = make_daemon(root, board=root / "b2", index=index).launch()  # nobody holds the index now
    assert exit_code(second) == EXIT_STARTUP_FAILED, second.log()
    refusal = second.log()
    assert f"the index {index} belongs to the board {root / 'b1'}" in refusal
    assert "its own index" in refusal and f"delete {index}" in refusal
    assert table_ids(index) == first_ids


def test_each_board_has_its_own_index_so_switching_boards_embeds_nothing(root, make_daemon, models_dir):
    x_ids = make_board(root / "x", "lanternfish", 3)
    make_board(root / "y", "periwinkle", 2)
    embedded, indexes = [], []
    for board in ("x", "y", "x"):
        daemon = make_daemon(
            root, board=root / board, index="", model="", env={"MEMORYD_MODELS": str(models_dir)}
        )
        daemon.start()
        passes = poll(lambda d=daemon: d.events("index_backfilled"), "the embedding pass", timeout=180)
        embedded.append(passes[-1]["embedded"])
        indexes.append(Path(daemon.status()["index"]))
        stop(daemon)
    assert embedded == [3, 2, 0]  # X's vectors were still there when X was served again
    assert indexes[0] == indexes[2] != indexes[1]
    home = root / "home"
    assert (
        all(i.parent == home / "cache" / "indexes" for i in indexes)
        and home / "data" / "index" not in indexes
    )
    assert table_ids(indexes[0]) == x_ids


def test_an_in_process_search_goes_to_the_daemon_that_writes_that_index(root, make_daemon):
    index = root / "index"
    ids = make_board(root / "b1", "gondolier", 3)
    daemon = make_daemon(root, board=root / "b1", index=index).start()
    wait_engine_ready(daemon)
    nowhere = root / "none.sock"  # no daemon here: the search would go in-process on the daemon's index
    argv = ("gondolier", "--board", str(root / "b1"), "--index", str(index), "--socket", str(nowhere))
    answer = search_json(daemon.env, *argv)
    assert answer["via"] == "daemon" and answer["board"] == str(root / "b1")
    assert sorted(r["brief_id"] for r in answer["results"]) == ids
    assert f"the daemon on {daemon.socket} (pid {daemon.proc.pid})" in answer["stderr"]
