"""Fixtures for the importer tests (helpers in :mod:`support.importers`)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def board(tmp_path: Path) -> Path:
    """Where the import writes (absent until the first real import creates it)."""
    return tmp_path / "board"
