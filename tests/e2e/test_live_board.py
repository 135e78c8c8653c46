"""The live board end to end: a daemon watching a copy of the sample board, spoken to in raw JSON-RPC lines.

Files are written the ways people and editors write them (in place, temp file + rename, rename-away +
create, delete + create, whole folders removed) while the daemon runs, and while it is stopped; each change
must show in the tools within a bounded poll (a correctness check: the 1 s p95 target is measured in
``bench/``). Most tests share one keyword-only daemon (``--model none``) served in-process
(:mod:`support.inprocess_daemon`) and each touches briefs of its own; the restart and real-model tests run
real daemons and the real shim (``memoryd-shim --no-start``) on their own board copies, and twelve real
shims at once are in ``test_briefs_processes.py``. One test runs the real
writer in process, to pin down a race between it and the tools that no socket test can time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.index.terms import terms
from support.briefs import SHIM, Shim, copy_board, wait_engine_ready
from support.daemon import REPO, DaemonProcess, short_tmpdir
from support.inprocess_daemon import InprocessDaemon, InprocessShim
from support.memories import wait_hybrid

MEMORYD = REPO / ".venv" / "bin" / "memoryd"
POLL_S = 10.0  # a bound for correctness, not a latency target (bench/ measures that)

# Sample-board briefs and tasks, one set per test so that tests sharing the daemon never meet.
TEMP_RENAME = "b-20260804-d88d9e"
RENAME_AWAY = "b-20260805-96c7ca"
DELETE_CREATE = "b-20260806-34ea42"
RMTREE_TASK = "t-20260805-fedb9e"  # six briefs; one of them is removed
NOTES = "b-20260811-43a237"
SCREENS = "b-20260803-52ea08"  # screens 1 and 2, each with .png/.txt/.json
OPEN_TASK = "t-20260908-c4236c"
KNOWN_QUERY, KNOWN_TASK = "idempotency key capture retry", "t-20260903-e84499"  # untouched by these tests

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")


# --- the board, written like people and editors write it ---------------------------------------------


def write_task(board: Path, task_id: str, *, title: str, status: str = "open", project: str = "shopfront"):
    task = {
        "id": task_id,
        "title": title,
        "project": project,
        "status": status,
        "created_at": "2026-11-20T09:00:00Z",
    }
    (board / "tasks" / f"{task_id}.json").write_text(json.dumps(task, indent=2) + "\n")


def write_brief(
    board: Path,
    brief_id: str,
    task_id: str,
    *,
    said: str | bytes,
    title: str,
    summary: str = "Written by the live-board test.",
    project: str = "shopfront",
    created_at: str = "2026-11-20T09:05:00Z",
) -> Path:
    folder = board / "briefs" / brief_id
    folder.mkdir()
    meta = {
        "id": brief_id,
        "task": task_id,
        "project": project,
        "created_at": created_at,
        "title": title,
        "summary": summary,
    }
    (folder / "brief.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    if isinstance(said, bytes):
        (folder / "said.txt").write_bytes(said)
    else:
        (folder / "said.txt").write_text(said)
    (folder / "prompt.md").write_text("Look into it and report back.\n")
    return folder


def replace_via_temp(path: Path, text: str) -> None:
    """How most editors save: a temp file beside the target, then an atomic rename over it."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


# --- asking the daemon ---------------------------------------------------------------------------------


def found(shim: Shim, query: str) -> list[str]:
    """Brief ids search_briefs returns for ``query`` (up to 50)."""
    return [r["brief_id"] for r in shim.ok("search_briefs", query=query, limit=50)["results"]]


def poll(check: Callable[[], Any], what: str, timeout: float = POLL_S, interval: float = 0.05) -> Any:
    """Call ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(interval)


def task_ids(shim: Shim, **filters: Any) -> list[str]:
    return [t["task_id"] for t in shim.ok("list_tasks", limit=100, **filters)["tasks"]]


def log_events(daemon: DaemonProcess, event: str) -> list[dict]:
    """The daemon's JSON log lines (stderr) with ``"event": event``."""
    out = []
    for line in daemon.log().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            out.append(record)
    return out


# --- fixtures --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(shared_board, request):
    """One keyword-only in-process daemon on a copy of the sample board, shared by the tests that each
    touch their own briefs."""
    root = short_tmpdir()
    daemon = None
    try:
        daemon = InprocessDaemon(root, board=copy_board(shared_board, root / "board"))
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon
    finally:
        if daemon is not None:
            daemon.kill()
            mine = [i for i in request.session.items if i.module is request.module]
            if any(getattr(i, "rep_call", None) and i.rep_call.failed for i in mine):
                print(f"\n--- live-board daemon log ---\n{daemon.log()[-20000:]}")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shim(live):
    s = InprocessShim(live).initialize()
    yield s
    s.close()


# --- while the daemon runs ----------------------------------------------------------------------------


def test_a_new_brief_folder_becomes_searchable_and_listed(live, shim):
    task, brief = "t-20261120-a1b2c3", "b-20261120-a1b2c3"
    write_task(live.board, task, title="Quibbleflux banner on the order page")
    write_brief(
        live.board,
        brief,
        task,
        said="the quibbleflux banner covers the order total on small phones\nmove it below the fold",
        title="Move the quibbleflux banner",
    )
    poll(lambda: found(shim, "quibbleflux") == [brief], "the new brief found by its word")
    result = shim.ok("search_briefs", query="quibbleflux")["results"][0]
    assert (result["task_id"], result["project"], result["date"]) == (task, "shopfront", "2026-11-20")
    assert result["said"] == "the quibbleflux banner covers the order total on small phones"
    poll(lambda: task in task_ids(shim, status="open"), "the new task in list_tasks(status=open)")
    row = next(t for t in shim.ok("list_tasks", limit=100)["tasks"] if t["task_id"] == task)
    assert row["briefs"] == 1 and row["status"] == "open" and row["last_activity"] == "2026-11-20"
    answer = shim.ok("get_task", task_id=task)
    assert [b["brief_id"] for b in answer["briefs"]] == [brief]
    assert answer["briefs"][0]["said"] == result["said"]
    assert shim.ok("get_brief", brief_id=brief)["title"] == "Move the quibbleflux banner"


def test_an_edit_saved_through_a_temp_file_and_rename(live, shim):
    said = live.board / "briefs" / TEMP_RENAME / "said.txt"
    said.write_text("first draft mentions the plonkwhistle cache\n")
    poll(lambda: found(shim, "plonkwhistle") == [TEMP_RENAME], "the first draft found")
    replace_via_temp(said, "second draft is about the zindlemoor queue instead\n")
    poll(
        lambda: found(shim, "zindlemoor") == [TEMP_RENAME] and found(shim, "plonkwhistle") == [],
        "new words found and old words gone after temp + rename",
    )
    assert not said.with_name("said.txt.tmp").exists()
    assert "zindlemoor" in shim.ok("get_brief", brief_id=TEMP_RENAME)["said"]


def test_an_edit_saved_by_renaming_the_old_file_away_then_creating_it(live, shim):
    said = live.board / "briefs" / RENAME_AWAY / "said.txt"
    said.write_text("the grumbletrout export is slow\n")
    poll(lambda: found(shim, "grumbletrout") == [RENAME_AWAY], "the old text found")
    said.rename(said.with_name("said.txt~"))  # the backup keeps the old words: it must not be read
    said.write_text("the fizzlemark import is slow\n")
    poll(
        lambda: found(shim, "fizzlemark") == [RENAME_AWAY] and found(shim, "grumbletrout") == [],
        "new words found and old words gone after rename-away + create",
    )
    assert "grumbletrout" in said.with_name("said.txt~").read_text()


def test_an_edit_saved_by_delete_then_create(live, shim):
    said = live.board / "briefs" / DELETE_CREATE / "said.txt"
    said.write_text("the wobblequince report times out\n")
    poll(lambda: found(shim, "wobblequince") == [DELETE_CREATE], "the old text found")
    said.unlink()
    said.write_text("the snargleberry report times out\n")
    poll(
        lambda: found(shim, "snargleberry") == [DELETE_CREATE] and found(shim, "wobblequince") == [],
        "new words found and old words gone after delete + create",
    )
    # The same with a pause longer than the debounce in between: the gap is indexed, then the new file.
    said.unlink()
    time.sleep(0.6)
    said.write_text("the crumplehorn report times out\n")
    poll(
        lambda: found(shim, "crumplehorn") == [DELETE_CREATE] and found(shim, "snargleberry") == [],
        "new words found after a delete, a pause, and a create",
    )


def test_a_deleted_brief_folder_is_gone_from_every_tool(live, shim):
    before = shim.ok("get_task", task_id=RMTREE_TASK)
    brief = before["briefs"][1]["brief_id"]
    title = shim.ok("get_brief", brief_id=brief)["title"]
    assert brief in found(shim, title)
    shutil.rmtree(live.board / "briefs" / brief)
    poll(lambda: brief not in found(shim, title), "the deleted brief gone from search_briefs")
    after = shim.ok("get_task", task_id=RMTREE_TASK)
    assert [b["brief_id"] for b in after["briefs"]] == [
        b["brief_id"] for b in before["briefs"] if b["brief_id"] != brief
    ]
    assert after["briefs_total"] == before["briefs_total"] - 1
    assert f"No brief {brief}" in shim.failed("get_brief", brief_id=brief)
    row = next(t for t in shim.ok("list_tasks", limit=100)["tasks"] if t["task_id"] == RMTREE_TASK)
    assert row["briefs"] == before["briefs_total"] - 1


def test_a_deleted_note_line_is_forgotten(live, shim):
    notes = live.board / "briefs" / NOTES / "notes.md"
    original = notes.read_text()
    notes.write_text(
        original.rstrip("\n") + "\n- ask about the flibbertine rollout\n- keep the jorvanic flag\n"
    )
    poll(
        lambda: found(shim, "flibbertine") == [NOTES] and found(shim, "jorvanic") == [NOTES],
        "both new note lines found",
    )
    replace_via_temp(notes, original.rstrip("\n") + "\n- keep the jorvanic flag\n")
    poll(
        lambda: found(shim, "flibbertine") == [] and found(shim, "jorvanic") == [NOTES],
        "the deleted note line's words gone, the kept line still found",
    )
    kept = shim.ok("get_brief", brief_id=NOTES)["notes"]
    assert "keep the jorvanic flag" in kept and not any("flibbertine" in n for n in kept)


def test_a_screen_whose_png_is_deleted_no_longer_finds_the_brief(live, shim):
    screens = live.board / "briefs" / SCREENS / "screens"
    with (screens / "1.txt").open("a") as f:
        f.write("\nTooltip: the marblewick toggle\n")
    poll(lambda: found(shim, "marblewick") == [SCREENS], "the screen's text found")
    assert shim.ok("get_brief", brief_id=SCREENS)["screenshots"] == [
        str(screens / "1.png"),
        str(screens / "2.png"),
    ]
    (screens / "1.png").unlink()
    poll(lambda: found(shim, "marblewick") == [], "the screen's text forgotten with its .png")
    assert shim.ok("get_brief", brief_id=SCREENS)["screenshots"] == [str(screens / "2.png")]
    assert (screens / "1.txt").exists()  # the text is still on disk: only the .png decides


def test_a_task_flipped_to_done_leaves_the_open_list(live, shim):
    path = live.board / "tasks" / f"{OPEN_TASK}.json"
    assert OPEN_TASK in task_ids(shim, status="open")
    brief = shim.ok("get_task", task_id=OPEN_TASK)["briefs"][0]["brief_id"]
    title = shim.ok("get_brief", brief_id=brief)["title"]
    task = json.loads(path.read_text())
    replace_via_temp(path, json.dumps({**task, "status": "done"}, indent=2) + "\n")
    poll(lambda: OPEN_TASK not in task_ids(shim, status="open"), "the task gone from the open list")
    assert OPEN_TASK in task_ids(shim, status="done")
    assert shim.ok("get_task", task_id=OPEN_TASK)["task"]["status"] == "done"
    # Every brief record carries its task's status: search says "done" too.
    poll(
        lambda: any(
            r["brief_id"] == brief and r["task_status"] == "done"
            for r in shim.ok("search_briefs", query=title, limit=50)["results"]
        ),
        "search results of the task's brief say done",
    )


def test_broken_files_written_while_running_do_not_stop_the_daemon(live, shim):
    board = live.board
    task = "t-20261124-0000cc"
    write_task(board, task, title="Broken files test")
    bad_json = write_brief(
        board, "b-20261124-0000aa", task, said="the dreadnaught spline\n", title="Sprocket one"
    )
    (bad_json / "brief.json").write_text('{"id": "b-20261124-0000aa", "task": "t-2026')  # cut mid-write
    bad_utf8 = write_brief(
        board,
        "b-20261124-0000bb",
        task,
        said=b"the \xff\xfe wozzlecrank \xc3\x28 said\n",
        title="The brambleduck title",
    )
    (board / "tasks" / "t-20261124-0000dd.json").write_bytes(b'{"id": "t-20261124-0000dd", \xff')
    good = write_brief(board, "b-20261124-0000ee", task, said="the hollowfen page\n", title="Good one")
    poll(lambda: found(shim, "hollowfen") == [good.name], "a good brief written after the broken ones found")
    assert live.proc.poll() is None and live.status()["engine"]["watcher"] == "alive"
    # The brief with a broken said.txt is served without it; the one with a broken brief.json is not served.
    assert found(shim, "brambleduck") == [bad_utf8.name] and found(shim, "wozzlecrank") == []
    assert found(shim, "dreadnaught") == []
    assert f"No brief {bad_json.name}" in shim.failed("get_brief", brief_id=bad_json.name)
    assert shim.ok("get_brief", brief_id=bad_utf8.name)["said"] == ""
    assert "t-20261124-0000dd" not in task_ids(shim)
    assert found(shim, KNOWN_QUERY)[0] in {
        b["brief_id"] for b in shim.ok("get_task", task_id=KNOWN_TASK)["briefs"]
    }
    # Finishing the half-written file brings the brief in.
    replace_via_temp(
        bad_json / "brief.json",
        json.dumps(
            {
                "id": bad_json.name,
                "task": task,
                "project": "shopfront",
                "created_at": "2026-11-24T10:00:00Z",
                "title": "Sprocket one",
                "summary": "Fixed.",
            }
        ),
    )
    poll(lambda: found(shim, "dreadnaught") == [bad_json.name], "the repaired brief found")


# --- in process: the writer and the readers ---------------------------------------------------------


def test_tools_can_read_the_snapshot_while_the_writer_applies_changes(shared_board, tmp_path):
    """In process, with the real writer: tools iterate the briefs source's snapshot on the event loop while the
    writer thread applies board changes. It used to change those dicts in place, so a concurrent
    list_tasks/get_task could fail with "dictionary changed size during iteration"."""
    from memoryd.core.indexer import Indexer, Pending
    from memoryd.index.searcher import RWLock
    from memoryd.index.store import IndexStore
    from memoryd.kinds.briefs.source import BriefSource, brief_origin

    board = copy_board(shared_board, tmp_path / "board")
    source = BriefSource(board)
    indexer = Indexer(IndexStore(tmp_path / "index"), lambda: None, RWLock(), sources=[source])
    indexer.full_sync()
    stop = threading.Event()
    applied: list[int] = []

    failed: list[BaseException] = []

    def churn() -> None:  # add a brief and remove an older one, again and again
        try:
            for i in range(3, 100_000):
                if stop.is_set():
                    return
                new = f"b-20261201-{i:06x}"
                write_brief(board, new, KNOWN_TASK, said="churn\n", title="Churn")
                gone = f"b-20261201-{i - 3:06x}"
                shutil.rmtree(board / "briefs" / gone, ignore_errors=True)
                indexer._apply(Pending(paths={brief_origin(new), brief_origin(gone)}))
                applied.append(i)
        except BaseException as exc:
            failed.append(exc)

    writer = threading.Thread(target=churn)
    writer.start()
    errors, started = [], time.monotonic()
    try:  # at least 2 s and 10 writes (fewer fit in 2 s on a loaded machine); at most 30 s
        while (time.monotonic() - started < 2 or len(applied) < 10) and time.monotonic() - started < 30:
            if failed:
                break
            try:
                for brief in source.snapshot.briefs.values():  # what Engine.list_tasks/briefs_of do
                    _ = brief.task
                for task in source.snapshot.tasks.values():
                    _ = task.status
            except RuntimeError as exc:
                errors.append(str(exc))
    finally:
        stop.set()
        writer.join(30)
    assert errors == [] and failed == []
    assert len(applied) >= 10
    assert len(source.snapshot.briefs) == 200 + 3  # the board's, plus the churn's last three


# --- while the daemon is stopped ---------------------------------------------------------------------


def test_changes_made_while_stopped_are_reconciled_at_start(make_daemon, shared_board):
    first = make_daemon()
    board = copy_board(shared_board, first.board)
    edited, deleted, task = "b-20260818-f6c934", "b-20260827-612ad2", "t-20260820-df5498"
    during = "b-20260902-b1dab3"
    (board / "briefs" / edited / "said.txt").write_text("before the stop: the gribblewort menu\n")
    (board / "briefs" / deleted / "said.txt").write_text("soon deleted: the pocklesnout menu\n")
    first.start()
    wait_engine_ready(first)
    with Shim(first.socket, first.env).initialize() as s:
        assert found(s, "gribblewort") == [edited] and found(s, "pocklesnout") == [deleted]
    total = first.status()["engine"]["briefs"]
    first.signal(signal.SIGTERM)
    assert first.wait_exit(10) == 0
    first.kill()

    added = write_brief(
        board,
        "b-20261125-00aa11",
        task,
        said="added while stopped: the yarblecoil menu\n",
        title="Yarblecoil",
    )
    replace_via_temp(board / "briefs" / edited / "said.txt", "after the stop: the quintalbrook menu\n")
    shutil.rmtree(board / "briefs" / deleted)

    second = make_daemon(first.root, board=board).launch()
    # A save made while the daemon is still starting, just after it read the board, is not lost either.
    poll(lambda: log_events(second, "board_reconciled"), "the reconcile at start", timeout=60, interval=0.005)
    replace_via_temp(
        board / "briefs" / during / "said.txt", "saved during the start: the brindlequark menu\n"
    )
    second.wait_ready()
    wait_engine_ready(second)
    with Shim(second.socket, second.env).initialize() as s:
        # Reconciled before serving: no waiting for the watcher here.
        assert found(s, "yarblecoil") == [added.name]
        assert found(s, "quintalbrook") == [edited] and found(s, "gribblewort") == []
        assert found(s, "pocklesnout") == []
        assert f"No brief {deleted}" in s.failed("get_brief", brief_id=deleted)
        briefs = [b["brief_id"] for b in s.ok("get_task", task_id=task)["briefs"]]
        assert added.name in briefs
        poll(lambda: found(s, "brindlequark") == [during], "the save made during the start")
    (reconciled,) = log_events(second, "board_reconciled")
    assert {k: reconciled[k] for k in ("added", "updated", "deleted", "unchanged", "skipped")} == {
        "added": 1,
        "updated": 1,
        "deleted": 1,
        "unchanged": total - 2,  # nothing else was rewritten
        "skipped": 0,
    }
    assert second.status()["engine"]["briefs"] == total


# --- the real model: both halves ---------------------------------------------------------------------

MEANING_SAID = (
    "the greenhouse irrigation controller waters the tomato beds twice around midnight, so the soil is "
    "soaked and the seedlings rot; make it water once, at dawn. ticket zumbrelfax"
)
MEANING_TITLE = "Irrigation controller double watering"
MEANING_SUMMARY = "The sprinkler schedule fires twice every night."
# German, sharing no word with the brief (checked below): only the meaning half can find it.
MEANING_QUERY = "Gewächshaus Bewässerung gießt Tomaten nachts doppelt"


def test_a_saved_brief_is_found_by_keyword_and_by_meaning_with_the_real_model(
    make_daemon, shared_board, models_dir
):
    daemon = make_daemon(model="", env={"MEMORYD_MODELS": str(models_dir)})
    board = copy_board(shared_board, daemon.board)
    # A third of the sample board (67 briefs) keeps the first embedding pass short on 2 cores while
    # leaving plenty of distractors for the meaning half.
    for i, folder in enumerate(sorted((board / "briefs").iterdir())):
        if i % 3:
            shutil.rmtree(folder)
    outcome_brief = sorted(p.name for p in (board / "briefs").iterdir())[0]
    daemon.start()
    wait_hybrid(daemon)
    assert not set(terms(MEANING_QUERY, query=True)) & set(
        terms(" ".join([MEANING_SAID, MEANING_TITLE, MEANING_SUMMARY, "Greenhouse watering"]))
    )
    # Saved right away, while the records written keyword-only get their vectors: neither the new brief
    # nor save_outcome may wait for that whole embedding pass.
    task, brief = "t-20261126-0a0b0c", "b-20261126-0a0b0c"
    write_task(board, task, title="Greenhouse watering", project="homelab")
    write_brief(
        board, brief, task, said=MEANING_SAID, title=MEANING_TITLE, summary=MEANING_SUMMARY, project="homelab"
    )
    with Shim(daemon.socket, daemon.env).initialize() as s:

        def top(query: str) -> str | None:
            answer = s.ok("search_briefs", query=query, limit=5)
            assert answer["mode"] == "hybrid", answer
            return answer["results"][0]["brief_id"] if answer["results"] else None

        saved = s.ok("save_outcome", brief_id=outcome_brief, did=["Fixed the snorblewick hinge"], open=[])
        assert saved["searchable"] is True
        assert top("snorblewick") == outcome_brief
        poll(lambda: top("zumbrelfax") == brief, "the new brief found by its keyword")

        # The meaning half is judged against the whole board's vectors: wait for the pass to end.
        poll(lambda: log_events(daemon, "index_backfilled"), "the first embedding pass", timeout=120)
        done = subprocess.run(
            [str(MEMORYD), "status", "--json", "--socket", str(daemon.socket)],
            capture_output=True,
            text=True,
            env=daemon.env,
            timeout=60,
            cwd="/",
        )
        status = json.loads(done.stdout)
        assert status["search_mode"] == "hybrid" and status["model"]["state"] == "ready", status
        poll(lambda: top(MEANING_QUERY) == brief, "the new brief found by a German paraphrase")
        assert top("zumbrelfax") == brief
