"""save_outcome and ensure_board: writes stay inside a real brief folder, links are replaced, never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memoryd.board.gate import InvalidId, UnsafePath
from memoryd.kinds.briefs.files import Outcome, parse_outcome, render_outcome
from memoryd.kinds.briefs.reader import BoardReader
from memoryd.kinds.briefs.source import BoardUnreadable
from memoryd.kinds.briefs.writer import BriefNotFound, ensure_board, save_outcome
from support.board import BRIEF, OUTSIDE_WORDS, write_brief

OUTCOME = Outcome(
    did=("Found the redirect", "Wrote it up"), open=("Fix it",), files=("apps/web/src/middleware.ts",)
)
EXPECTED = """## Did
- Found the redirect
- Wrote it up
## Decided
- none
## Open
- Fix it
## Files
- apps/web/src/middleware.ts
## Retired
- none
"""


def brief_dir(board: Path) -> Path:
    return board / "briefs" / BRIEF


def test_save_outcome_writes_the_exact_shape(board):
    path = save_outcome(board, BRIEF, OUTCOME)
    assert path == brief_dir(board) / "outcome.md"
    assert path.read_text(encoding="utf-8") == EXPECTED == render_outcome(OUTCOME)
    assert parse_outcome(path.read_text(encoding="utf-8")) == OUTCOME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in brief_dir(board).iterdir()) == [
        "brief.json",
        "outcome.md",
        "prompt.md",
        "said.txt",
        "screens",
    ]  # no temp file left behind
    assert BoardReader(board).read_brief(BRIEF).outcome == OUTCOME


def test_each_call_replaces_the_last(board):
    save_outcome(board, BRIEF, OUTCOME)
    second = Outcome(did=("Fixed it",), retired=("the old redirect",))
    save_outcome(board, BRIEF, second)
    assert parse_outcome((brief_dir(board) / "outcome.md").read_text()) == second


def test_symlinked_outcome_is_replaced_not_followed(board, outside):
    target = outside / "secret.txt"
    before = target.stat()
    (brief_dir(board) / "outcome.md").symlink_to(target)
    save_outcome(board, BRIEF, OUTCOME)
    outcome = brief_dir(board) / "outcome.md"
    assert not outcome.is_symlink() and outcome.read_text() == EXPECTED
    assert target.read_text() == OUTSIDE_WORDS
    after = target.stat()
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_ino,
    )


def test_hard_linked_outcome_is_replaced_and_the_other_name_untouched(board, outside):
    os.link(outside / "secret.txt", brief_dir(board) / "outcome.md")
    save_outcome(board, BRIEF, OUTCOME)
    assert (outside / "secret.txt").read_text() == OUTSIDE_WORDS
    assert (brief_dir(board) / "outcome.md").stat().st_nlink == 1


def test_symlinked_brief_folder_is_refused(board, outside):
    write_brief(outside.parent / "elsewhere", "b-20260101-cccccc")
    target = outside.parent / "elsewhere" / "briefs" / "b-20260101-cccccc"
    (board / "briefs" / "b-20260101-cccccc").symlink_to(target, target_is_directory=True)
    with pytest.raises(UnsafePath, match="symlink"):
        save_outcome(board, "b-20260101-cccccc", OUTCOME)
    assert not (target / "outcome.md").exists()
    assert sorted(p.name for p in target.iterdir()) == ["brief.json", "prompt.md", "said.txt"]


def test_symlinked_briefs_folder_is_refused(tmp_path, board):
    real = tmp_path / "real-briefs"
    (board / "briefs").rename(real)
    (board / "briefs").symlink_to(real, target_is_directory=True)
    with pytest.raises(UnsafePath, match="symlink"):
        save_outcome(board, BRIEF, OUTCOME)
    assert not (real / BRIEF / "outcome.md").exists()


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "../../etc/passwd",
        "/etc/passwd",
        "b-20260101-bbbbbb/../x",
        "%2e%2e",
        "b-２０２６０１０１-bbbbbb",
    ],
)
def test_bad_ids_are_refused_before_touching_the_disk(tmp_path, bad):
    missing = tmp_path / "no-board-here"
    with pytest.raises(InvalidId):
        save_outcome(missing, bad, OUTCOME)
    assert not missing.exists()


def test_unknown_brief_is_not_found(board):
    with pytest.raises(BriefNotFound):
        save_outcome(board, "b-20991231-000000", OUTCOME)
    (board / "briefs" / "b-20991231-000001").mkdir()  # a folder without brief.json is no brief
    with pytest.raises(BriefNotFound):
        save_outcome(board, "b-20991231-000001", OUTCOME)
    assert not (board / "briefs" / "b-20991231-000001" / "outcome.md").exists()


def test_outcome_directory_is_refused(board):
    (brief_dir(board) / "outcome.md").mkdir()
    (brief_dir(board) / "outcome.md" / "keep").write_text("x")
    with pytest.raises(UnsafePath, match="directory"):
        save_outcome(board, BRIEF, OUTCOME)
    assert [p.name for p in brief_dir(board).iterdir() if p.name.startswith(".")] == []


def test_missing_board_is_unreadable(tmp_path):
    with pytest.raises(BoardUnreadable):
        save_outcome(tmp_path / "missing", BRIEF, OUTCOME)


def test_ensure_board_creates_private_folders(tmp_path):
    root = tmp_path / "data" / "board"
    ensure_board(root)
    ensure_board(root)  # idempotent
    for path in (root, root / "tasks", root / "briefs"):
        assert path.is_dir() and stat.S_IMODE(path.stat().st_mode) == 0o700
    assert BoardReader(root).load().briefs == {}


def test_ensure_board_refuses_a_file(tmp_path):
    (tmp_path / "board").write_text("x")
    with pytest.raises(BoardUnreadable):
        ensure_board(tmp_path / "board")
    (tmp_path / "b2").mkdir()
    (tmp_path / "b2" / "briefs").write_text("x")
    with pytest.raises(BoardUnreadable, match="briefs"):
        ensure_board(tmp_path / "b2")
