"""Fixtures for the board tests: a small valid board and a folder outside it (real files in tmp_path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.kinds.briefs.writer import ensure_board
from support.board import BRIEF, OUTSIDE_WORDS, TASK, write_brief, write_task


@pytest.fixture
def board(tmp_path: Path) -> Path:
    """A valid one-task, one-brief board at tmp_path/board."""
    root = tmp_path / "board"
    ensure_board(root)
    write_task(root)
    write_brief(root, screens={"1": "Pay now button"})
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the board holding files a planted link might point at."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text(OUTSIDE_WORDS, encoding="utf-8")
    (d / "brief.json").write_text(
        json.dumps(
            {
                "id": BRIEF,
                "task": TASK,
                "project": "x",
                "created_at": "2026-01-01T00:00:00Z",
                "title": OUTSIDE_WORDS,
            }
            | {"summary": OUTSIDE_WORDS}
        ),
        encoding="utf-8",
    )
    return d
