"""The daemon's malloc tuning: fewer heaps on glibc unless the user set ``MALLOC_ARENA_MAX``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryd.index import memory


def test_the_users_malloc_arena_max_wins():
    assert memory.limit_arenas({"MALLOC_ARENA_MAX": "4"}) is False


@pytest.mark.skipif(memory._MALLOPT is None, reason="glibc's mallopt is not available on this platform")
def test_on_glibc_the_heaps_are_capped_and_memory_is_trimmed():
    code = "from memoryd.index import memory; print(memory.limit_arenas({})); memory.release_memory()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_single_row_writes_keep_lancedbs_caches_within_their_bounds(tmp_path, monkeypatch):
    """Each single-row write is a LanceDB version whose manifest lists every fragment; with LanceDB's
    default bounds (1 GiB of metadata) the cached manifests grow with the square of the writes."""
    import numpy as np

    from memoryd.index import store as store_module
    from memoryd.index.records import Record
    from memoryd.index.store import IndexStore

    bound = 1 << 20
    monkeypatch.setattr(store_module, "METADATA_CACHE_BYTES", bound)
    monkeypatch.setattr(store_module, "INDEX_CACHE_BYTES", bound)
    store = IndexStore(tmp_path / "index")
    for i in range(200):
        said = f"fixed the login loop {i}"
        rec = Record(f"r-{i:05d}", "memory", "p", "", "", "2026-01-01", "", said, said, "", said)
        vector = np.random.default_rng(i).standard_normal((1, 384)).astype(np.float32)
        store.upsert([rec], vector / np.linalg.norm(vector), "m")
        assert store.keyword("login loop", store_module.ANY_ROW, 5)
    assert store.count() == 200
    assert store._session.size_bytes <= 2 * bound
