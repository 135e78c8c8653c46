"""Forgotten is forgotten everywhere: a note line deleted by hand, a screen whose .png is
removed, a whole brief deleted. The real daemon on a copy of the sample board, the real shim, and the bytes
of the index folder.

The words to forget are on the board before the daemon starts, so they sit in the index's first, large
data file among 200 rows (a row written later lives in a small file that compaction drops whole, which would
make the test pass without the purge's rewrite). Each test first shows the words in the index bytes while
they are live, then that they stay there after the deletion until maintenance runs (the daemon here never
runs it on its own: the interval is an hour), then that ``memoryd forget --now`` removes them from every
file of the index folder. The last tests show
the documented bound without ``--now`` (a short interval), the in-process path when no daemon runs, and
that it never writes beside a daemon that holds the board.
"""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest

from support.briefs import SHIM, Shim, copy_board, wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir
from support.privacy import (
    board_text,
    files_containing,
    forget_now,
    in_index,
    index_bytes,
    poll,
    run_memoryd,
    unique_words,
)

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

NOTES = "b-20260811-43a237"  # one note line
SCREENS = "b-20260803-52ea08"  # screens 1 and 2, each with .png/.txt/.json
GONE_TASK, GONE = "t-20261001-5dad95", "b-20261003-0d8fe2"  # a task of six briefs; this one is deleted
HOUR = {"MEMORYD_OPTIMIZE_INTERVAL_S": "3600"}
NOTE_GONE, NOTE_KEPT = "- ask about the quillfeather brambleton rollout\n", "- keep the snickerwick flag\n"
SCREEN_GONE, SCREEN_KEPT = "\nTooltip: the marrowvale tinderquist toggle\n", "\nStatus bar: palisandrix\n"


def plant(board) -> None:
    """Words of our own, on the board before the daemon starts (see the module docstring)."""
    fresh_words(
        board, "quillfeather", "brambleton", "snickerwick", "marrowvale", "tinderquist", "palisandrix"
    )
    with (board / "briefs" / NOTES / "notes.md").open("a") as f:
        f.write(NOTE_GONE + NOTE_KEPT)
    screens = board / "briefs" / SCREENS / "screens"
    with (screens / "1.txt").open("a") as f:
        f.write(SCREEN_GONE)
    with (screens / "2.txt").open("a") as f:
        f.write(SCREEN_KEPT)


@pytest.fixture(scope="module")
def served(shared_board, request):
    """A keyword-only daemon whose maintenance never runs by itself during the module (interval 1 h)."""
    root = short_tmpdir()
    board = copy_board(shared_board, root / "board")
    plant(board)
    daemon = DaemonProcess(root, board=board, env=HOUR)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon
    finally:
        daemon.kill()
        mine = [i for i in request.session.items if i.module is request.module]
        if any(getattr(i, "rep_call", None) and i.rep_call.failed for i in mine):
            print(f"\n--- forgetting daemon log ---\n{daemon.log()[-20000:]}")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shim(served):
    s = Shim(served.socket, served.env).initialize()
    yield s
    s.close()


def index_of(daemon: DaemonProcess):
    return daemon.root / "index"


def found(shim: Shim, query: str) -> list[str]:
    return [r["brief_id"] for r in shim.ok("search_briefs", query=query, limit=50)["results"]]


def fresh_words(board, *words: str) -> tuple[str, ...]:
    """``words`` after checking that none occurs anywhere on the board yet."""
    text = board_text(board)
    assert not [w for w in words if w in text], words
    return words


def replace_via_temp(path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def assert_forgotten(daemon: DaemonProcess, words, kept) -> dict:
    """Words still in the index bytes before maintenance, gone after ``forget --now``; ``kept`` stay."""
    index = index_of(daemon)
    for word in words:
        assert in_index(index, word), f"{word!r} should still be on disk before maintenance"
    report = forget_now(daemon)
    data = index_bytes(index)
    for word in words:
        assert word.lower().encode() not in data, (word, files_containing(index, word))
    for word in kept:  # the rewrite kept the live rows, and the byte search still sees them
        assert word.lower().encode() in data, word
    return report


def test_a_deleted_note_line_leaves_the_tools_at_once_and_the_disk_after_maintenance(served, shim):
    notes = served.board / "briefs" / NOTES / "notes.md"
    assert found(shim, "quillfeather") == [NOTES] and in_index(index_of(served), "brambleton")
    replace_via_temp(notes, notes.read_text().replace(NOTE_GONE, ""))
    poll(lambda: found(shim, "quillfeather brambleton") == [], "the deleted note line gone from search")
    assert found(shim, "snickerwick") == [NOTES]
    brief = shim.ok("get_brief", brief_id=NOTES)
    assert "keep the snickerwick flag" in brief["notes"]
    assert not any("quillfeather" in n for n in brief["notes"])
    report = assert_forgotten(served, ["quillfeather", "brambleton"], ["snickerwick"])
    assert report["reconciled"]["deleted"] == 0 and report["index_bytes_after"] > 0


def test_a_removed_screenshot_leaves_the_tools_at_once_and_the_disk_after_maintenance(served, shim):
    screens = served.board / "briefs" / SCREENS / "screens"
    assert found(shim, "marrowvale") == [SCREENS] and found(shim, "palisandrix") == [SCREENS]
    assert in_index(index_of(served), "tinderquist")
    (screens / "1.png").unlink()
    poll(lambda: found(shim, "marrowvale tinderquist") == [], "the screen's text gone with its .png")
    assert found(shim, "palisandrix") == [SCREENS]  # the other screen still counts
    assert shim.ok("get_brief", brief_id=SCREENS)["screenshots"] == [str(screens / "2.png")]
    assert (screens / "1.txt").exists()  # only the .png decides; the text stays on the board, unread
    assert_forgotten(served, ["marrowvale", "tinderquist"], ["palisandrix"])
    assert (screens / "1.txt").exists()


def test_a_deleted_brief_leaves_every_tool_at_once_and_the_disk_after_maintenance(served, shim):
    folder = served.board / "briefs" / GONE
    own = unique_words(board_text(folder), board_text(served.board, skip=(folder,)), min_len=7)
    assert len(own) >= 3, own  # words only this brief has: the test must have something to look for
    title = shim.ok("get_brief", brief_id=GONE)["title"]
    assert GONE in found(shim, title)
    before = shim.ok("get_task", task_id=GONE_TASK)
    assert GONE in [b["brief_id"] for b in before["briefs"]]
    assert in_index(index_of(served), GONE) and all(in_index(index_of(served), w) for w in own)

    shutil.rmtree(folder)
    poll(lambda: GONE not in found(shim, title), "the deleted brief gone from search_briefs")
    for word in own:
        assert GONE not in found(shim, word)
    after = shim.ok("get_task", task_id=GONE_TASK)
    assert GONE not in [b["brief_id"] for b in after["briefs"]]
    assert after["briefs_total"] == before["briefs_total"] - 1
    assert f"No brief {GONE}" in shim.failed("get_brief", brief_id=GONE)
    row = next(t for t in shim.ok("list_tasks", limit=100)["tasks"] if t["task_id"] == GONE_TASK)
    assert row["briefs"] == before["briefs_total"] - 1
    sibling = served.board / "briefs" / after["briefs"][0]["brief_id"]
    kept = unique_words(board_text(sibling), board_text(served.board, skip=(sibling,)), min_len=7)
    assert kept, sibling
    report = assert_forgotten(served, [GONE, *sorted(own)], [sibling.name, *sorted(kept)])
    assert report["records"] == 199


def test_forget_without_now_states_the_bound(served):
    done = run_memoryd(served.env, "forget", "--json", "--socket", str(served.socket))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"bound_s": 3600.25, "optimize_interval_s": 3600}
    human = run_memoryd(served.env, "forget", "--socket", str(served.socket))
    assert "within 3600.25 s" in human.stdout and "memoryd forget --now" in human.stdout


# --- the bound without --now, and without a daemon ---------------------------------------------------


def test_without_forget_now_maintenance_purges_within_the_documented_bound(make_daemon, shared_board):
    """MEMORYD_OPTIMIZE_INTERVAL_S=2: the deleted line leaves the disk by itself (bound 2.25 s; the poll
    allows for a loaded machine and the rewrite, and asserts no timing)."""
    daemon = make_daemon(env={"MEMORYD_OPTIMIZE_INTERVAL_S": "2"})
    copy_board(shared_board, daemon.board)
    notes = daemon.board / "briefs" / NOTES / "notes.md"
    original = notes.read_text()
    fresh_words(daemon.board, "gallowmere")
    notes.write_text(original + "- the gallowmere switch\n")
    daemon.start()
    wait_engine_ready(daemon)
    with Shim(daemon.socket, daemon.env).initialize() as s:
        assert found(s, "gallowmere") == [NOTES]
        assert in_index(daemon.root / "index", "gallowmere")
        replace_via_temp(notes, original)
        poll(lambda: found(s, "gallowmere") == [], "the deleted note line gone from search")
    poll(
        lambda: not in_index(daemon.root / "index", "gallowmere"),
        "the deleted line gone from disk",
        timeout=60,
    )
    # Maintenance did it (it logs once done), not a forget request; and it stays gone.
    poll(lambda: '"purge": true' in daemon.log(), "the purge logged", timeout=60)
    assert not in_index(daemon.root / "index", "gallowmere")
    assert "forget_requested" not in daemon.log()


def test_forget_now_without_a_daemon_runs_in_process(make_daemon, shared_board):
    daemon = make_daemon(env=HOUR)
    copy_board(shared_board, daemon.board)
    daemon.start()
    wait_engine_ready(daemon)
    index = daemon.root / "index"
    folder = daemon.board / "briefs" / GONE
    own = unique_words(board_text(folder), board_text(daemon.board, skip=(folder,)), min_len=7)
    assert own and all(in_index(index, w) for w in own)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait_exit(15) == 0
    shutil.rmtree(folder)  # deleted while no daemon runs
    argv = ["forget", "--now", "--json", "--socket", str(daemon.socket)]
    argv += ["--board", str(daemon.board), "--index", str(index)]
    done = run_memoryd(daemon.env, *argv)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["via"] == "in-process" and report["reconciled"]["deleted"] == 1 and report["records"] == 199
    data = index_bytes(index)
    assert GONE.encode() not in data and not [w for w in own if w.encode() in data]
    assert b"idempotency" in data  # the rest is still there, and visible to the byte search


def served_with_a_brief_gone(make_daemon, shared_board) -> tuple[DaemonProcess, object, list[str]]:
    """A daemon serving the eval board (maintenance an hour away), whose brief GONE was then deleted:
    ``(daemon, its index folder, that brief's own words)``."""
    daemon = make_daemon(env=HOUR)
    copy_board(shared_board, daemon.board)
    daemon.start()
    wait_engine_ready(daemon)
    folder = daemon.board / "briefs" / GONE
    own = unique_words(board_text(folder), board_text(daemon.board, skip=(folder,)), min_len=7)
    shutil.rmtree(folder)
    return daemon, daemon.root / "index", own


def test_forget_never_writes_beside_a_daemon_that_holds_the_board(make_daemon, shared_board):
    daemon, index, own = served_with_a_brief_gone(make_daemon, shared_board)
    # Another socket: nothing answers there, so the CLI would work in-process, but the daemon holds the board.
    other = daemon.root / "other.sock"
    argv = ["forget", "--now", "--socket", str(other), "--board", str(daemon.board), "--index", str(index)]
    done = run_memoryd(daemon.env, *argv)
    assert done.returncode == 1, (done.stdout, done.stderr)
    # the holder is named, with the socket to purge through
    assert f"(pid {daemon.status()['pid']})" in done.stderr, done.stderr
    assert f"memoryd forget --now --socket {daemon.socket}" in done.stderr, done.stderr
    assert done.stdout == ""  # nothing was done in-process
    assert daemon.status()["running"] is True
    forget_now(daemon)  # the daemon's own writer does it
    data = index_bytes(index)
    assert not [w for w in own if w.encode() in data]


def test_forget_now_names_the_daemons_index_when_told_another(make_daemon, shared_board):
    daemon, index, own = served_with_a_brief_gone(make_daemon, shared_board)
    other = daemon.root / "other-index"
    argv = ["forget", "--now", "--socket", str(daemon.socket), "--board", str(daemon.board)]
    done = run_memoryd(daemon.env, *argv, "--index", str(other))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"with the index {index}, not {other}" in done.stderr, done.stderr
    assert done.stdout == "" and not other.exists()
    assert [w for w in own if w.encode() in index_bytes(index)], "the daemon's index was purged all the same"
    done = run_memoryd(daemon.env, *argv, "--index", str(index))  # its own index: purged through it
    assert done.returncode == 0, done.stderr
    assert not [w for w in own if w.encode() in index_bytes(index)]
