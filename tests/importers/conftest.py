"""Fixtures for the importer tests (helpers in :mod:`import_helpers`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "e2e"))  # DaemonProcess and the raw shim, for the end-to-end test


@pytest.fixture
def board(tmp_path: Path) -> Path:
    """Where the import writes (absent until the first real import creates it)."""
    return tmp_path / "board"
