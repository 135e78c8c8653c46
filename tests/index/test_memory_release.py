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
