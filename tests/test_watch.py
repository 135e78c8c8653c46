"""BoardWatcher on a real temp board with the real watchdog observer (inotify here, FSEvents on macOS).

Most tests use a 100 ms debounce to stay fast; the latency and coalescing tests use the default 250 ms.
"Nothing happened" is checked by waiting a quiet window a few debounce periods long.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memoryd.board.gate import is_brief_id, is_task_id
from memoryd.core.sources import make_sources
from memoryd.core.watch import BoardWatcher, Change, is_ignored_name

B1 = "b-20260101-aaaaaa"
B2 = "b-20260101-bbbbbb"
B3 = "b-20260101-cccccc"
T1 = "t-20260101-111111"
QUIET = 0.4  # seconds without a callback that count as "nothing was reported" at a 100 ms debounce
FIRST = 3.0  # seconds to wait for the first callback of all (inotify and the timer thread under load)


class Recorder:
    """Collects every Change; waits on a condition, never sleeps in a loop."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.times: list[float] = []
        self._cond = threading.Condition()

    def __call__(self, change: Change) -> None:
        with self._cond:
            self.changes.append(change)
            self.times.append(time.monotonic())
            self._cond.notify_all()

    def wait_for(self, pred: Callable[[Change], bool], timeout: float = 3.0) -> Change:
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = 0
            while True:
                for change in self.changes[seen:]:
                    if pred(change):
                        return change
                seen = len(self.changes)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching change within {timeout}s; got {self.changes}")
                self._cond.wait(left)

    def settle(self, quiet: float = QUIET, first: float = FIRST) -> list[Change]:
        """Wait until no callback arrived for ``quiet`` seconds (``first`` seconds while none has come
        yet: on a busy machine the first one may come later than ``quiet``); return everything so far."""
        with self._cond:
            if not self.changes:
                self._cond.wait(first)
            while True:
                count = len(self.changes)
                self._cond.wait(quiet)
                if len(self.changes) == count:
                    return list(self.changes)

    def clear(self) -> None:
        with self._cond:
            self.changes.clear()
            self.times.clear()


def briefs_named(changes: list[Change]) -> set[str]:
    """The brief ids the changes name, as the briefs record source reads them (other names it ignores)."""
    parts = [p.split("/") for c in changes for p in c.paths]
    return {p[1] for p in parts if p[0] == "briefs" and len(p) == 2 and is_brief_id(p[1])}


def tasks_named(changes: list[Change]) -> set[str]:
    parts = [p.split("/") for c in changes for p in c.paths]
    return {
        p[1][:-5]
        for p in parts
        if p[0] == "tasks" and len(p) == 2 and p[1].endswith(".json") and is_task_id(p[1][:-5])
    }


@pytest.fixture
def board(tmp_path: Path) -> Path:
    root = tmp_path / "board"
    (root / "briefs").mkdir(parents=True)
    (root / "tasks").mkdir()
    return root


@pytest.fixture
def watch(board: Path) -> Iterator[Callable[..., tuple[BoardWatcher, Recorder]]]:
    started: list[BoardWatcher] = []

    def make(root: Path = board, debounce_ms: int = 100, on_change=None) -> tuple[BoardWatcher, Recorder]:
        rec = Recorder()
        watcher = BoardWatcher(root, on_change or rec, make_sources(root), debounce_ms=debounce_ms)
        watcher.start()
        started.append(watcher)
        return watcher, rec

    yield make
    for watcher in started:
        watcher.stop()


def write_brief(board: Path, brief_id: str, said: str = "make the header sticky") -> Path:
    folder = board / "briefs" / brief_id
    (folder / "screens").mkdir(parents=True, exist_ok=True)
    (folder / "brief.json").write_text(json.dumps({"id": brief_id}))
    (folder / "said.txt").write_text(said)
    (folder / "prompt.md").write_text("# prompt")
    (folder / "screens" / "1.png").write_bytes(b"\x89PNG")
    return folder


# -- the board changes an editor or an agent makes ---------------------------------------------------------


def test_new_brief_folder_is_one_change_naming_it(board, watch):
    _, rec = watch(debounce_ms=250)
    write_brief(board, B1)
    changes = rec.settle()
    assert changes == [Change(paths=frozenset({f"briefs/{B1}"}))]


def test_editor_save_temp_then_replace(board, watch):
    folder = write_brief(board, B1)
    _, rec = watch()
    tmp = folder / "said.txt.tmp"
    tmp.write_text("the header should stay on top")
    os.replace(tmp, folder / "said.txt")  # the move's destination is the real name: it must count
    assert briefs_named(rec.settle()) == {B1}


def test_rename_away_then_create(board, watch):
    folder = write_brief(board, B1)
    _, rec = watch()
    os.rename(folder / "said.txt", folder / "said.txt~")
    (folder / "said.txt").write_text("new words")
    changes = rec.settle()
    assert briefs_named(changes) == {B1}
    assert not any(c.rescan for c in changes)


def test_delete_whole_brief_folder(board, watch):
    folder = write_brief(board, B1)
    _, rec = watch(debounce_ms=250)
    shutil.rmtree(folder)  # files, then screens/, then the folder: bottom-up
    changes = rec.settle()
    assert briefs_named(changes) == {B1}
    assert len(changes) == 1


def test_task_json_edited(board, watch):
    task = board / "tasks" / f"{T1}.json"
    task.write_text(json.dumps({"id": T1, "status": "open"}))
    _, rec = watch()
    tmp = board / "tasks" / f".{T1}.json.tmp"
    tmp.write_text(json.dumps({"id": T1, "status": "done"}))
    os.replace(tmp, task)
    (board / "tasks" / "notes.txt").write_text("not a task")  # not <task-id>.json: the source ignores it
    changes = rec.settle()
    assert tasks_named(changes) == {T1} and not briefs_named(changes)
    assert not any(c.rescan for c in changes)


def test_rapid_writes_are_coalesced(board, watch):
    folder = write_brief(board, B1)
    _, rec = watch(debounce_ms=250)
    for i in range(50):
        (folder / "notes.md").write_text(f"- note {i}\n")
        time.sleep(0.005)
    changes = rec.settle(quiet=0.6)
    assert 1 <= len(changes) <= 3, changes
    assert all(c.paths == {f"briefs/{B1}"} for c in changes)


def test_continuous_writer_still_reported_within_max_delay(board, watch):
    folder = write_brief(board, B1)
    watcher, rec = watch(debounce_ms=250)
    start = time.monotonic()
    while time.monotonic() - start < 1.4:  # never quiet for 250 ms: only the ~1 s max delay can fire
        (folder / "notes.md").write_text(f"- {time.monotonic()}\n")
        time.sleep(0.05)
    assert rec.times, "a file written continuously was never reported"
    assert rec.times[0] - start < 1.4
    assert watcher.last_event_at is not None and watcher.last_event_at >= start


def test_temp_files_and_reads_alone_report_nothing(board, watch):
    folder = write_brief(board, B1)
    watcher, rec = watch()
    names = [".#said.txt", "said.txt.swp", "said.txt.swx", "4913", "said.txt~", ".DS_Store", "notes.md.bak"]
    names += [".said.txt.tmp", "said.txt.tmp"]
    for name in names:
        (folder / name).write_text("x")
    for name in names:
        (folder / name).unlink()
    for path in folder.rglob("*"):  # the consumer re-reading the brief must never trigger a change
        if path.is_file():
            path.read_bytes()
    assert rec.settle() == []
    # A dotfile in the root is the health check's liveness probe: it moves last_event_at, reports nothing.
    (board / ".memoryd-heartbeat-test").write_text("x")
    (board / ".memoryd-heartbeat-test").unlink()
    deadline = time.monotonic() + 3
    while watcher.last_event_at is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert watcher.last_event_at is not None
    assert rec.settle() == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the early drop is inotify's")
def test_a_writers_temp_files_stop_before_the_handler_and_its_link_is_reported(board, watch):
    """What the board writer does per file (a dotfile temp: create, write, close; link or rename to the
    final name; unlink the temp): only the final name reaches the handler. An editor's in-place write
    and its temp + rename save of the same file are reported too."""
    from memoryd.board import atomic
    from memoryd.board.gate import open_folder

    (board / "memories").mkdir()
    watcher, rec = watch()
    with open_folder(board, "memories") as d:
        for _ in range(5):  # the temps' own events are dropped where they enter watchdog
            with atomic.temp_file(d, "x.md", b"temp only"):
                pass
    assert rec.settle() == []
    assert watcher.last_event_at is None  # not one of them reached the handler
    name = "a" * 64 + ".md"
    with open_folder(board, "memories") as d:
        assert atomic.write_new(d, name, b"---\n---\nfirst\n")
    assert rec.wait_for(lambda c: f"memories/{name}" in c.paths)
    rec.settle()
    rec.clear()
    with open(board / "memories" / name, "r+b") as f:  # in place, as some editors save
        f.seek(0, os.SEEK_END)
        f.write(b"more\n")
    assert rec.wait_for(lambda c: f"memories/{name}" in c.paths)
    rec.settle()
    rec.clear()
    tmp = board / "memories" / f".{name}.swp"  # temp + rename, as vim and most editors save
    tmp.write_bytes(b"---\n---\nrewritten\n")
    os.replace(tmp, board / "memories" / name)
    assert rec.wait_for(lambda c: f"memories/{name}" in c.paths)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the early drop is inotify's")
def test_a_link_made_without_echo_is_dropped_once_and_every_later_change_of_it_is_reported(board, watch):
    """A store hands its new file to the index itself (``write_new(echo=False)``): the link's creation
    event stops at watchdog's reader; a link with an echo, and every change after the link (a delete and
    a new file of that name, an in-place write), are reported as ever."""
    from memoryd.board import atomic
    from memoryd.board.gate import open_folder

    (board / "memories").mkdir()
    watcher, rec = watch()
    quiet, loud = "b" * 64 + ".md", "c" * 64 + ".md"
    with open_folder(board, "memories") as d:
        assert atomic.write_new(d, quiet, b"---\n---\nquiet\n", echo=False)
    assert rec.settle() == []
    assert watcher.last_event_at is None
    with open_folder(board, "memories") as d:
        assert atomic.write_new(d, loud, b"---\n---\nloud\n")
        assert not atomic.write_new(d, quiet, b"---\n---\nagain\n", echo=False)  # exists: nothing waits
    assert rec.wait_for(lambda c: f"memories/{loud}" in c.paths)
    rec.settle()
    rec.clear()
    (board / "memories" / quiet).unlink()  # by hand: delete, then create anew
    (board / "memories" / quiet).write_text("---\n---\nby hand\n")
    assert rec.wait_for(lambda c: f"memories/{quiet}" in c.paths)
    rec.settle()
    rec.clear()
    with open(board / "memories" / quiet, "a") as f:
        f.write("more\n")
    assert rec.wait_for(lambda c: f"memories/{quiet}" in c.paths)


def test_many_entries_written_at_once_are_all_reported(board, watch):
    """The timer is woken only when a deadline comes earlier than the one it waits for: a burst of new
    entries is still reported whole, within about the debounce."""
    (board / "memories").mkdir()
    _, rec = watch()
    names = {f"{i:064x}.md" for i in range(60)}
    for name in names:
        (board / "memories" / name).write_text("x")
    started = time.monotonic()
    changes = rec.settle()
    assert {p for c in changes for p in c.paths if p.startswith("memories/")} == {
        f"memories/{n}" for n in names
    }
    assert rec.times[0] - started < 1.0


def test_memories_and_sessions_pass_through_and_stray_names_are_ignored(board, watch):
    _, rec = watch()
    (board / "memories").mkdir()
    (board / "memories" / "m1.md").write_text("remember")
    (board / "sessions").mkdir()
    (board / "sessions" / "s.jsonl").write_text("{}")
    (board / "README.md").write_text("top-level stray")
    (board / "briefs" / "not-an-id").mkdir()
    (board / "briefs" / "not-an-id" / "said.txt").write_text("ignored")
    changes = rec.settle()
    paths = set().union(*(c.paths for c in changes))
    assert paths - {"briefs/not-an-id"} == {"memories", "memories/m1.md", "sessions", "sessions/s.jsonl"}
    assert briefs_named(changes) == set()  # the briefs source ignores a folder whose name is no brief id
    assert not any(c.rescan or tasks_named([c]) for c in changes)


def test_briefs_folder_moved_wholesale_is_a_rescan_of_its_source(board, watch):
    write_brief(board, B1)
    _, rec = watch()
    os.rename(board / "briefs", board / "briefs.old")
    rec.wait_for(lambda c: "briefs" in c.paths)  # the folder itself: its source reloads it all


# -- symlinks ----------------------------------------------------------------------------------------------


def test_symlinked_folders_are_never_followed(board, tmp_path, watch):
    """watchdog (follow_symlink=False) never adds an inotify watch through a symlink: a link is reported as
    an entry of its parent (its own creation names the brief, the reader then refuses it), and nothing
    that happens inside the target is ever seen."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    folder = write_brief(board, B1)
    os.symlink(outside, board / "briefs" / B2)  # a brief folder that is a link, present at start
    os.symlink(outside, folder / "linked")  # a link inside a real brief
    _, rec = watch()
    (outside / "said.txt").write_text("outside")
    (outside / "deep" / "x.txt").write_text("outside")
    assert rec.settle() == []

    os.symlink(outside, board / "briefs" / B3)  # created while watching: the link itself is an event
    assert briefs_named(rec.settle()) == {B3}
    rec.clear()
    (outside / "said.txt").write_text("outside again")
    (outside / "deep" / "y.txt").write_text("outside again")
    assert rec.settle() == []


def test_symlinked_root_is_watched_at_its_real_path(board, tmp_path, watch):
    link = tmp_path / "board-link"
    os.symlink(board, link)
    _, rec = watch(root=link)
    write_brief(board, B1)
    assert briefs_named(rec.settle()) == {B1}


# -- robustness --------------------------------------------------------------------------------------------


def test_callback_exception_does_not_kill_the_watcher(board, watch):
    rec = Recorder()
    raised = threading.Event()

    def flaky(change: Change) -> None:
        if not raised.is_set():
            raised.set()
            raise RuntimeError("consumer bug")
        rec(change)

    watcher, _ = watch(on_change=flaky)
    write_brief(board, B1)
    assert raised.wait(3.0)
    write_brief(board, B2)
    rec.wait_for(lambda c: f"briefs/{B2}" in c.paths)
    assert watcher.alive()


def test_callback_is_never_concurrent(board, watch):
    lock = threading.Lock()
    overlaps = 0
    rec = Recorder()

    def slow(change: Change) -> None:
        nonlocal overlaps
        if not lock.acquire(blocking=False):
            overlaps += 1
            return
        try:
            time.sleep(0.3)
            rec(change)
        finally:
            lock.release()

    watch(on_change=slow)
    for brief_id in (B1, B2, B3):
        write_brief(board, brief_id)
        time.sleep(0.15)  # each id comes due while the previous callback is still running
    rec.settle(quiet=0.5)
    assert overlaps == 0
    assert briefs_named(rec.changes) == {B1, B2, B3}


def test_stop_joins_within_timeout_and_drops_pending(board, watch):
    watcher, rec = watch(debounce_ms=250)
    write_brief(board, B1)  # pending, not yet due
    start = time.monotonic()
    watcher.stop(timeout=2.0)
    assert time.monotonic() - start < 2.0
    assert not watcher.alive()
    assert not any(t.name == "memoryd-watch" and t.is_alive() for t in threading.enumerate())
    time.sleep(0.4)
    assert rec.changes == []
    watcher.stop()  # twice is fine


def test_latency_save_to_callback(board, watch):
    folder = write_brief(board, B1)
    _, rec = watch(debounce_ms=250)
    start = time.monotonic()
    tmp = folder / ".said.txt.swp"
    tmp.write_text("edited")
    os.replace(tmp, folder / "said.txt")
    rec.wait_for(lambda c: f"briefs/{B1}" in c.paths, timeout=3.0)  # correctness bound, not a benchmark
    latency = rec.times[0] - start
    assert latency < 3.0
    print(f"save -> callback: {latency * 1000:.0f} ms")


def test_root_deleted_and_recreated_is_rescan_then_live_again(board, watch):
    watcher, rec = watch()
    shutil.rmtree(board)
    rec.wait_for(lambda c: c.rescan)
    assert not watcher.alive()
    rec.clear()
    (board / "briefs").mkdir(parents=True)
    rec.wait_for(lambda c: c.rescan, timeout=4.0)  # the health check (1 s) found it and re-watched
    assert watcher.alive()
    write_brief(board, B1)
    rec.wait_for(lambda c: f"briefs/{B1}" in c.paths)


def test_root_moved_away_is_noticed(board, tmp_path, watch):
    watcher, rec = watch()
    os.rename(
        board, tmp_path / "board.old"
    )  # inotify keeps watching the moved folder: only the stat check sees it
    (board / "briefs").mkdir(parents=True)
    rec.wait_for(lambda c: c.rescan, timeout=4.0)
    rec.clear()
    write_brief(board, B1)
    rec.wait_for(lambda c: f"briefs/{B1}" in c.paths)
    write_brief(tmp_path / "board.old", B2)
    assert B2 not in briefs_named(rec.settle())


def test_dead_observer_is_restarted_and_restart_reports_rescan(board, watch):
    watcher, rec = watch()
    watcher._observer.stop()  # the observer dies behind the watcher's back
    rec.wait_for(lambda c: c.rescan, timeout=4.0)
    assert watcher.alive()
    rec.clear()
    watcher.restart()
    rec.wait_for(lambda c: c.rescan)
    assert watcher.alive()
    write_brief(board, B1)
    rec.wait_for(lambda c: f"briefs/{B1}" in c.paths)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify queue overflow is Linux-only")
def test_inotify_overflow_is_a_rescan(board, watch):
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"max_queued_events={limit}: too many events to overflow quickly")
    folder = write_brief(board, B1)
    _, rec = watch()
    # Another process (no GIL shared with the reader) alternates utime on two files: distinct events that
    # the kernel cannot merge, far faster than watchdog reads them.
    code = "import os,sys\nfor _ in range(int(sys.argv[1])): os.utime('said.txt'); os.utime('prompt.md')"
    subprocess.run([sys.executable, "-c", code, str(limit * 2)], cwd=folder, check=True)
    rec.wait_for(lambda c: c.rescan, timeout=10.0)


@pytest.mark.parametrize(
    ("name", "ignored"),
    [
        (".#said.txt", True),
        ("said.txt~", True),
        ("said.txt.swp", True),
        ("said.txt.swx", True),
        ("x.tmp", True),
        (".outcome.md.1a2b3c.tmp", True),
        ("4913", True),
        ("notes.md.bak", True),
        (".DS_Store", True),
        ("#said.txt#", True),
        ("said.txt", False),
        ("1.png", False),
        (f"{T1}.json", False),
        (B1, False),
    ],
)
def test_ignored_names(name, ignored):
    assert is_ignored_name(name) is ignored
