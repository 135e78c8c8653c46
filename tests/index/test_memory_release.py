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


_LARGE_BLOCKS = """
import ctypes
from pathlib import Path
from memoryd.index import memory
memory.limit_arenas({})
print(memory.map_large_blocks({}))
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss_mb():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20
libc.free(libc.malloc(16 << 20))  # by default glibc now raises its threshold to 16 MiB
before = rss_mb()
blocks = []
for _ in range(24):  # 6 MiB buffers, each followed by a smaller block that outlives it
    blocks.append(libc.malloc(6 << 20))
    ctypes.memset(blocks[-1], 1, 6 << 20)
    libc.malloc(256 << 10)  # from the heap either way, after the buffer
for block in blocks:
    libc.free(block)
print(rss_mb() - before)
"""


@pytest.mark.skipif(memory._MALLOPT is None, reason="glibc's mallopt is not available on this platform")
def test_large_blocks_leave_the_process_when_freed():
    """144 MiB of 6 MiB buffers freed between smaller live blocks: from glibc's heap they would stay
    resident until a trim; mapped alone they are unmapped at once."""
    out = subprocess.run([sys.executable, "-c", _LARGE_BLOCKS], capture_output=True, text=True, check=True)
    applied, kept_mb = out.stdout.split()
    assert applied == "True"
    assert float(kept_mb) < 16, out.stdout


def test_single_row_writes_keep_lancedbs_caches_within_their_bounds(tmp_path, monkeypatch):
    """Each single-row write is a LanceDB version whose manifest lists every fragment; with LanceDB's
    default bounds (1 GiB of metadata) the cached manifests grow with the square of the writes."""
    import numpy as np

    from memoryd.index import store as store_module
    from memoryd.index import table as table_module
    from memoryd.index.records import Record
    from memoryd.index.store import IndexStore

    bound = 1 << 20
    monkeypatch.setattr(table_module, "METADATA_CACHE_BYTES", bound)  # read by table._connect
    monkeypatch.setattr(table_module, "INDEX_CACHE_BYTES", bound)
    store = IndexStore(tmp_path / "index")
    for i in range(200):
        said = f"fixed the login loop {i}"
        rec = Record(f"r-{i:05d}", "memory", "p", "", "", "2026-01-01", "", said, said, "", said)
        vector = np.random.default_rng(i).standard_normal((1, 384)).astype(np.float32)
        store.upsert([rec], vector / np.linalg.norm(vector), "m")
        assert store.keyword("login loop", store_module.ANY_ROW, 5)
    assert store.count() == 200
    assert store._session.size_bytes <= 2 * bound


_BATCH_RSS = """
import sys
from pathlib import Path
from memoryd.index import embed, memory
memory.limit_arenas()
embedder, status = embed.load_embedder(None, Path(sys.argv[1]))
assert embedder is not None, status
embed._TRIM_AFTER_TOKENS = 1 << 30  # what the batch itself leaves behind, before any trim
texts = [f"passage {i}: " + " ".join(f"step{j} of the rollout {i * j}" for j in range(30)) for i in range(32)]
def status_mb(field):
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field))
    return int(line.split()[1]) / 1024
memory.trim()
Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts again from here
before = status_mb("VmRSS:")
embedder.embed_passages(texts)
print(status_mb("VmHWM:") - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_batch_leaves_no_buffers_behind(models_dir):
    """32 passages of ~216 tokens (two runs, each the first of its shape): with every intermediate tensor
    a glibc malloc, the process peaked 230-410 MB above its resting RSS (a fragmented heap); in
    onnxruntime's arena, shrunk after each run, ~157 MB."""
    from memoryd.index.embed import load_embedder

    assert load_embedder(None, models_dir)[0] is not None  # built (or reused) here, not in the child
    out = subprocess.run(
        [sys.executable, "-c", _BATCH_RSS, str(models_dir)], capture_output=True, text=True, check=True
    ).stdout
    assert float(out.strip().splitlines()[-1]) < 200, out


_HELD_BATCHES = """
import resource
import sys
from pathlib import Path
import numpy as np
from memoryd.index import embed, memory
memory.limit_arenas()
memory.map_large_blocks()  # as the daemon: blocks from 4 MB on are mapped alone, and unmapped when freed
embedder, status = embed.load_embedder(None, Path(sys.argv[1]))
assert embedder is not None, status
texts = [f"passage {i}: " + " ".join(f"step{j} of the rollout {i * j}" for j in range(30)) for i in range(32)]
def rss_mb():
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024
def faulted_mb(fn):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = fn()
    return out, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) * resource.getpagesize() / 2**20
plain = embedder.embed_passages(texts)
_, plain_mb = faulted_mb(lambda: embedder.embed_passages(texts))
memory.trim()
resting = rss_mb()
first = embedder.embed_passages(texts, hold=True)
stream = [faulted_mb(lambda: embedder.embed_passages(texts, hold=True)) for _ in range(4)]
held = stream[-1][0]
held_mb = ",".join(str(mb) for _, mb in stream)
holding = rss_mb()
embedder.release()
released = rss_mb()
embedder.embed_passages(texts, hold=True)
embedder.embed_passages(["a short note after them, as single stores follow a backlog"], hold=True)
print(np.array_equal(plain, first) and np.array_equal(plain, held), plain_mb, held_mb, holding - resting,
      released - resting, rss_mb() - resting)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_held_batches_reuse_their_buffers_and_release_hands_them_back(models_dir):
    """Batches after a held one (the writer's stream of ``store_memories``) map and zero almost no
    memory: 170-390 MB of page faults per batch of 32 long passages when each run shrinks the arena. Held,
    the runs side by side on two threads take the arena's chunks in an order that varies from call to
    call, so the arena may still grow a little in the first few (0-8 MB here, 28 MB once under load;
    nothing on one thread); then nothing. The vectors are the same bit for bit, and :meth:`release`
    brings the RSS back to where it was."""
    from memoryd.index.embed import load_embedder

    assert load_embedder(None, models_dir)[0] is not None  # built (or reused) here, not in the child
    out = subprocess.run(
        [sys.executable, "-c", _HELD_BATCHES, str(models_dir)], capture_output=True, text=True, check=True
    ).stdout
    same, plain_mb, held_mb, holding_mb, released_mb, smaller_mb = out.strip().splitlines()[-1].split()
    assert same == "True"
    stream = sorted(float(mb) for mb in held_mb.split(","))
    assert float(plain_mb) > 100, plain_mb
    # four held batches: most fault nothing, and all four together less than a sixth of one unheld batch
    assert (stream[1] + stream[2]) / 2 < 5 and sum(stream) < 60, (plain_mb, held_mb)
    assert float(holding_mb) > 50, holding_mb  # held: the arena kept the batch's buffers
    assert float(released_mb) < 20, released_mb
    # a much smaller call in the same stream (single stores after a backlog) hands the held buffers back
    assert float(smaller_mb) < 20, smaller_mb


def test_the_users_arrow_pool_wins():
    env = {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}
    assert memory.system_arrow_pool(env) is False
    assert env == {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}


_ARROW_TABLES = """
import os
import threading
from pathlib import Path
from memoryd.index import memory
os.environ.pop("ARROW_DEFAULT_MEMORY_POOL", None)
memory.limit_arenas({})
memory.map_large_blocks({})
print(memory.system_arrow_pool())
import pyarrow as pa
def rss_mb():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20
def write(k):  # as the writer: a batch's rows become a table, dropped once written
    for n in range(8):
        rows = [{"id": f"{k}-{n}-{i}", "text": f"passage {i} " * 20, "v": [0.5] * 384} for i in range(400)]
        pa.Table.from_pylist(rows)
memory.trim()
before = rss_mb()
threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
memory.trim()
print(pa.default_memory_pool().backend_name, rss_mb() - before)
"""


@pytest.mark.skipif(memory._TRIM is None, reason="glibc's malloc_trim is not available on this platform")
def test_arrow_tables_built_on_threads_leave_no_pages_behind():
    """Tables built and dropped on four threads: pyarrow's bundled mimalloc kept 20-23 MB of their pages
    resident after a trim; from malloc's heap ~4 MB stay."""
    out = subprocess.run([sys.executable, "-c", _ARROW_TABLES], capture_output=True, text=True, check=True)
    applied, backend, kept_mb = out.stdout.split()
    assert (applied, backend) == ("True", "system")
    assert float(kept_mb) < 10, out.stdout


def _round(n: int) -> list:
    from memoryd.index.records import Record

    out = []
    for i in range(200):
        said = f"round{n} note {i}: fixed the login loop in module{i % 17} with retry{i % 11}"
        out.append(Record(f"r{n}-{i:04d}", "memory", "p", "", "", "2026-01-01", "", said, said, "", said))
    return out


def test_refreshed_text_indexes_leave_no_stale_copy_cached(tmp_path):
    """Every refresh of the text indexes makes new ones; without the table opened again afterwards the
    session's caches kept each older copy (2.5 MB after 8 refreshes of 200 rows here, 0.24 MB with it; up
    to 128 MiB in a daemon that runs for weeks). Searches answer the same before and after each refresh."""
    import numpy as np

    from memoryd.index.store import ANY_ROW, IndexStore

    store = IndexStore(tmp_path / "index")
    for n in range(8):
        records = _round(n)
        vectors = np.random.default_rng(n).standard_normal((len(records), 384)).astype(np.float32)
        store.upsert(records, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), "m")
        before = store.keyword(f"round{n} module3 retry5", ANY_ROW, 1)[0][0]
        assert before.startswith(f"r{n}-")
        store.refresh() if n % 2 else store.optimize()
        assert store.keyword(f"round{n} module3 retry5", ANY_ROW, 1)[0][0] == before
        for m in range(n + 1):  # every earlier round's rows, through the new indexes
            assert store.keyword(f"round{m} module{m} retry{m}", ANY_ROW, 3)[0][0].startswith(f"r{m}-")
    assert store.count() == 1600
    assert store._session.size_bytes < 1 << 20
