"""BoardReader: the sample board loads, broken files are skipped, planted links are never followed."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from memoryd.board.gate import InvalidId
from memoryd.kinds.briefs.reader import BoardReader
from memoryd.kinds.briefs.source import BoardUnreadable
from memoryd.kinds.briefs.writer import ensure_board
from support.board import BRIEF, OUTSIDE_WORDS, TASK, write_brief, write_task

REMOVED_SCREEN_BRIEF = "b-20260904-27e980"  # its screen 2 has .txt and .json but no .png


def reasons(snapshot) -> dict[str, str]:
    return {s.path: s.reason for s in snapshot.skipped}


# --- the sample board --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(shared_board):
    return BoardReader(shared_board).load()


def test_sample_board_loads_completely(sample):
    assert len(sample.tasks) == 60 and len(sample.briefs) == 200
    assert sample.skipped == []
    assert sum(b.outcome is not None for b in sample.briefs.values()) == 106
    assert sum(bool(b.notes) for b in sample.briefs.values()) == 19
    assert {t.status for t in sample.tasks.values()} == {"open", "done"}
    assert all(b.task in sample.tasks for b in sample.briefs.values())


def test_removed_screenshot_is_absent(sample, shared_board):
    brief = sample.briefs[REMOVED_SCREEN_BRIEF]
    assert [s.n for s in brief.screens] == ["1"]
    assert brief.screen_pngs == (f"briefs/{REMOVED_SCREEN_BRIEF}/screens/1.png",)
    # its words are on disk, in 2.txt and 2.json, but nowhere in what was loaded
    assert (
        "Thistlewood" in (shared_board / "briefs" / REMOVED_SCREEN_BRIEF / "screens" / "2.json").read_text()
    )
    assert "Thistlewood" not in repr(sample)
    assert "2.png" not in repr(brief) and "screens/2" not in repr(brief)


def test_every_screen_has_its_png(sample, shared_board):
    screens = 0
    for brief in sample.briefs.values():
        assert len(brief.screens) == len(brief.screen_pngs)
        for screen, png in zip(brief.screens, brief.screen_pngs, strict=True):
            assert png == f"briefs/{brief.id}/screens/{screen.n}.png" and (shared_board / png).is_file()
            screens += 1
    assert screens == 145


def test_read_one_brief_and_task(shared_board, sample):
    reader = BoardReader(shared_board)
    assert reader.read_brief("b-20260803-52ea08") == sample.briefs["b-20260803-52ea08"]
    assert reader.read_task("t-20260803-1cf523") == sample.tasks["t-20260803-1cf523"]
    assert reader.read_brief("b-20991231-000000") is None
    assert reader.read_task("t-20991231-000000") is None
    assert len(reader.brief_ids()) == 200 and len(reader.task_ids()) == 60


@pytest.mark.parametrize(
    "bad", ["../x", "/etc/passwd", "b-20260904-27e98", "b-２０２６０９０４-27e980", "t-20260803-1cf523"]
)
def test_read_brief_checks_the_id_first(shared_board, bad):
    with pytest.raises(InvalidId):
        BoardReader(shared_board).read_brief(bad)
    with pytest.raises(InvalidId):
        BoardReader(Path("/nonexistent")).read_brief(bad)  # before any file system call


# --- broken files ------------------------------------------------------------------------------------


def test_broken_files_are_skipped_and_the_rest_loads(board):
    briefs = board / "briefs"
    write_task(board, "t-20260102-000001")
    (board / "tasks" / "t-20260102-000002.json").write_text("{not json")
    (board / "tasks" / "t-20260102-000003.json").write_text('{"id": "t-20260102-000003", "title": "half')
    (board / "tasks" / "t-20260102-000004.json").write_bytes(b'{"id": "\xff\xfe"}')
    write_task(board, "t-20260102-000005", id="t-20260102-000006")  # id does not match the file name
    write_task(board, "t-20260102-000007", status="wip")
    (board / "tasks" / "notes.txt").write_text("not a task")
    (board / "tasks" / ".t-20260102-000008.json.swp").write_text("editor swap file")  # ignored silently

    write_brief(board, "b-20260102-000001")
    write_brief(board, "b-20260102-000002")
    (briefs / "b-20260102-000002" / "brief.json").write_text(
        '{"id": "b-20260102-000002", "ta'
    )  # half-written
    write_brief(board, "b-20260102-000003")
    (briefs / "b-20260102-000003" / "brief.json").write_bytes(b"\xff\xfe\x00{")  # invalid UTF-8
    write_brief(board, "b-20260102-000004", id="b-20260102-000005")  # wrong id
    write_brief(board, "b-20260102-000006", title=None)  # missing required field
    (briefs / "b-20260102-000007").mkdir()  # a folder named like a brief, no brief.json
    (briefs / "not-a-brief").mkdir()
    (briefs / "b-20260102-000008").write_text("a file, not a folder")
    write_brief(board, "b-20260102-000009", said=None)
    (briefs / "b-20260102-000009" / "said.txt").write_bytes(
        b"bad \xc3\x28 utf-8"
    )  # brief loads, said skipped
    write_brief(board, "b-20260102-000010")
    (briefs / "b-20260102-000010" / "screens").mkdir()
    (briefs / "b-20260102-000010" / "screens" / "1.png").write_bytes(b"png")
    (briefs / "b-20260102-000010" / "screens" / "1.json").write_text("{broken")  # screen stays, no metadata
    (briefs / "b-20260102-000010" / "outcome.md").write_bytes(b"## Did\n- \xff")

    snap = BoardReader(board).load()
    assert sorted(snap.tasks) == [TASK, "t-20260102-000001"]
    assert sorted(snap.briefs) == [BRIEF, "b-20260102-000001", "b-20260102-000009", "b-20260102-000010"]
    assert snap.briefs["b-20260102-000009"].said == ""
    b10 = snap.briefs["b-20260102-000010"]
    assert [(s.n, s.app, s.window_title) for s in b10.screens] == [("1", None, None)] and b10.outcome is None
    why = reasons(snap)
    assert "bad JSON" in why["tasks/t-20260102-000002.json"]
    assert "bad JSON" in why["tasks/t-20260102-000003.json"]
    assert "invalid UTF-8" in why["tasks/t-20260102-000004.json"]
    assert "does not match" in why["tasks/t-20260102-000005.json"]
    assert "status" in why["tasks/t-20260102-000007.json"]
    assert "not <task-id>.json" in why["tasks/notes.txt"]
    assert "bad JSON" in why["briefs/b-20260102-000002/brief.json"]
    assert "invalid UTF-8" in why["briefs/b-20260102-000003/brief.json"]
    assert "does not match its folder name" in why["briefs/b-20260102-000004/brief.json"]
    assert "'title'" in why["briefs/b-20260102-000006/brief.json"]
    assert why["briefs/b-20260102-000007/brief.json"] == "missing brief.json"
    assert why["briefs/not-a-brief"] == "name is not a brief id"
    assert why["briefs/b-20260102-000008"] == "regular file"
    assert "invalid UTF-8" in why["briefs/b-20260102-000009/said.txt"]
    assert "bad JSON" in why["briefs/b-20260102-000010/screens/1.json"]
    assert "invalid UTF-8" in why["briefs/b-20260102-000010/outcome.md"]
    assert not any(".swp" in path for path in why)
    assert len(snap.skipped) == 16


def test_read_brief_of_a_broken_brief_is_none(board):
    (board / "briefs" / BRIEF / "brief.json").write_text("{")
    assert BoardReader(board).read_brief(BRIEF) is None


# --- planted links and special files -----------------------------------------------------------------


def brief_path(board: Path, name: str) -> Path:
    return board / "briefs" / BRIEF / name


def loaded_without_outside_words(board: Path):
    snap = BoardReader(board).load()
    assert OUTSIDE_WORDS not in repr(snap)
    return snap


def test_symlinked_brief_file_is_not_read(board, outside):
    brief_path(board, "said.txt").unlink()
    brief_path(board, "said.txt").symlink_to(outside / "secret.txt")
    snap = loaded_without_outside_words(board)
    assert snap.briefs[BRIEF].said == ""
    assert reasons(snap) == {f"briefs/{BRIEF}/said.txt": "symlink"}


def test_hard_linked_brief_file_is_not_read(board, outside):
    brief_path(board, "prompt.md").unlink()
    os.link(outside / "secret.txt", brief_path(board, "prompt.md"))
    snap = loaded_without_outside_words(board)
    assert snap.briefs[BRIEF].prompt == ""
    assert reasons(snap) == {f"briefs/{BRIEF}/prompt.md": "hard link (2 links)"}


def test_symlinked_brief_json_skips_the_brief(board, outside):
    brief_path(board, "brief.json").unlink()
    brief_path(board, "brief.json").symlink_to(outside / "brief.json")
    snap = loaded_without_outside_words(board)
    assert snap.briefs == {}
    assert reasons(snap) == {f"briefs/{BRIEF}/brief.json": "symlink"}


def test_symlinked_brief_folder_is_not_walked(board, outside):
    (board / "briefs" / "b-20260101-cccccc").symlink_to(outside, target_is_directory=True)
    snap = loaded_without_outside_words(board)
    assert list(snap.briefs) == [BRIEF]
    assert reasons(snap) == {"briefs/b-20260101-cccccc": "symlink"}
    reader = BoardReader(board)
    assert reader.read_brief("b-20260101-cccccc") is None
    assert reader.brief_ids() == [BRIEF]


def test_symlinked_tasks_and_screens_folders_are_not_walked(board, outside):
    (board / "tasks").rename(board / "tasks-real")
    (board / "tasks").symlink_to(board / "tasks-real", target_is_directory=True)
    screens = brief_path(board, "screens")
    screens.rename(outside / "screens")
    screens.symlink_to(outside / "screens", target_is_directory=True)
    snap = loaded_without_outside_words(board)
    assert snap.tasks == {} and snap.briefs[BRIEF].screens == () and snap.briefs[BRIEF].screen_pngs == ()
    assert reasons(snap) == {"tasks": "symlink", f"briefs/{BRIEF}/screens": "symlink"}


def test_symlinked_png_means_no_screen(board, outside):
    png = brief_path(board, "screens/1.png")
    png.unlink()
    png.symlink_to(outside / "secret.txt")
    snap = loaded_without_outside_words(board)
    assert snap.briefs[BRIEF].screens == ()
    assert reasons(snap) == {f"briefs/{BRIEF}/screens/1.png": "symlink"}


@pytest.mark.timeout(10)
def test_fifo_said_txt_does_not_block(board):
    brief_path(board, "said.txt").unlink()
    os.mkfifo(brief_path(board, "said.txt"))
    snap = BoardReader(board).load()
    assert snap.briefs[BRIEF].said == ""
    assert reasons(snap) == {f"briefs/{BRIEF}/said.txt": "fifo"}
    assert BoardReader(board).read_brief(BRIEF).said == ""


@pytest.mark.timeout(10)
def test_fifos_where_folders_belong_do_not_block(board):
    os.mkfifo(board / "briefs" / "b-20260101-eeeeee")
    brief_path(board, "screens/1.png").unlink()
    brief_path(board, "screens/1.txt").unlink()
    brief_path(board, "screens/1.json").unlink()
    brief_path(board, "screens").rmdir()
    os.mkfifo(brief_path(board, "screens"))
    snap = BoardReader(board).load()
    assert list(snap.briefs) == [BRIEF] and snap.briefs[BRIEF].screens == ()
    assert reasons(snap) == {"briefs/b-20260101-eeeeee": "fifo", f"briefs/{BRIEF}/screens": "fifo"}


def test_socket_and_device_files_are_not_read(board, monkeypatch):
    brief_path(board, "prompt.md").unlink()
    brief_path(board, "notes.md").symlink_to("/dev/zero")  # a device reached through a link
    monkeypatch.chdir(brief_path(board, ""))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("prompt.md")
        snap = BoardReader(board).load()
    assert snap.briefs[BRIEF].prompt == "" and snap.briefs[BRIEF].notes == ()
    assert reasons(snap) == {f"briefs/{BRIEF}/prompt.md": "socket", f"briefs/{BRIEF}/notes.md": "symlink"}


# --- the root ----------------------------------------------------------------------------------------


def test_missing_root_is_unreadable(tmp_path):
    with pytest.raises(BoardUnreadable, match="does not exist"):
        BoardReader(tmp_path / "nope").load()
    with pytest.raises(BoardUnreadable):
        BoardReader(tmp_path / "nope").read_brief(BRIEF)


def test_file_as_root_is_unreadable(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(BoardUnreadable, match="not a directory"):
        BoardReader(tmp_path / "file").load()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 folder anyway")
def test_root_without_permission_is_unreadable(tmp_path):
    root = tmp_path / "board"
    ensure_board(root)
    root.chmod(0)
    try:
        with pytest.raises(BoardUnreadable, match="permission"):
            BoardReader(root).load()
    finally:
        root.chmod(0o700)


def test_empty_and_bare_boards_load_empty(tmp_path):
    ensure_board(tmp_path / "empty")
    assert BoardReader(tmp_path / "empty").load().briefs == {}
    (tmp_path / "bare").mkdir()  # no tasks/ or briefs/ yet
    snap = BoardReader(tmp_path / "bare").load()
    assert (snap.tasks, snap.briefs, snap.skipped) == ({}, {}, [])


def test_symlinked_root_is_followed(board, tmp_path):
    (tmp_path / "link").symlink_to(board, target_is_directory=True)
    assert list(BoardReader(tmp_path / "link").load().briefs) == [BRIEF]
