"""Index records and unit vectors made up for store tests that need real LanceDB but no model."""

from __future__ import annotations

import numpy as np

from memoryd.index.records import Record
from memoryd.index.terms import term_string

DIM = 384


def rec(i: int, words: str, kind: str = "memory", project: str = "p", prefix: str = "r") -> Record:
    """Record ``<prefix>-<i, 5 digits>`` whose keyword text is ``words`` (as our terms) and nothing else."""
    return Record(
        id=f"{prefix}-{i:05d}",
        kind=kind,
        project=project,
        task="",
        status="",
        created_at="2026-01-01T00:00:00Z",
        title=f"title {i}",
        line=words[:40],
        text_main=term_string(words),
        text_aux="",
        embed_text=words,
    )


def vecs(n: int, seed: int = 1) -> np.ndarray:
    """``n`` random unit vectors of :data:`DIM` floats (float32), the same for the same ``seed``."""
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
