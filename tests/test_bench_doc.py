"""``make bench`` rewrites only the blocks it measured in docs/benchmarks.md; hand-written text stays."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _doc():
    spec = importlib.util.spec_from_file_location("bench_doc", REPO / "bench" / "_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OLD = """# Benchmarks

<!-- bench:summary -->
## Targets
| benchmark | figure | value | target | |
|---|---|---:|---|---|
| shim | spawn | 24 ms | <= 50 ms | met |
| index | restart | 2.4 s | <= 3 s | met |
<!-- /bench:summary -->

<!-- bench:shim -->
## Shim
old shim table
<!-- /bench:shim -->

## A hand-written profile
where the milliseconds go

<!-- bench:how -->
## How
<!-- /bench:how -->
"""


def test_a_run_replaces_its_blocks_and_keeps_the_hand_written_text():
    doc = _doc()
    new = doc.merge(OLD, {"shim": "## Shim\nnew shim table", "users": "## Users\nusers table"})
    assert "new shim table" in new and "old shim table" not in new
    assert "## A hand-written profile\nwhere the milliseconds go\n" in new
    assert new.index("users table") < new.index("<!-- bench:how -->")  # a new block goes before "how"
    assert new.count("<!-- bench:shim -->") == 1
    assert doc.merge(new, {}) == new


def test_the_targets_of_benchmarks_not_run_are_kept():
    doc = _doc()
    kept = doc.kept_target_rows(doc.blocks(OLD)["summary"], {"shim"})
    assert kept == ["| index | restart | 2.4 s | <= 3 s | met |"]


def test_the_repository_doc_has_its_generated_blocks():
    names = set(_doc().blocks((REPO / "docs" / "benchmarks.md").read_text()))
    assert {"summary", "embed", "index", "search", "shim", "daemon", "how"} <= names
