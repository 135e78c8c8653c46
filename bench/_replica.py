"""Boards and indexes of 1,000-100,000 briefs, made from the 200 real briefs of board-v1.

Embedding 100,000 briefs at a few dozen briefs/s on 2 cores would take hours, so the big indexes are
*replicas*: copy ``k`` of every real record gets new brief and task ids with the same date
(``b-20260803-52ea08`` -> ``b-20260803-<6 hex>``), its text unchanged, and the vector already computed
for the original, and is written straight into an :class:`~memoryd.index.store.IndexStore` in batches.
Copy 0 keeps the real ids. :func:`write_board` writes the same replicas as real folders on disk, so the
records the daemon derives from them are exactly the records of :func:`replicate`.

What this means for the figures: every text occurs ``copies`` times, so keyword posting lists are longer
and nearest-neighbour lists hold duplicates (a real board of that size has more distinct words).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from _util import BOARD_V1


@dataclass
class Base:
    """The real board: its records (one per brief, in board order) and their passage vectors."""

    board: Path
    records: list  # memoryd.index.records.Record
    vectors: np.ndarray | None  # float32 (len(records), dim), or None before embedding
    model: str


def load_base(board: Path = BOARD_V1) -> Base:
    """Read the board and derive its records (no embedding yet)."""
    from memoryd.index.records import brief_record
    from memoryd.kinds.briefs.reader import BoardReader

    snap = BoardReader(board).load()
    records = [brief_record(b, snap.tasks.get(b.task)) for _, b in sorted(snap.briefs.items())]
    return Base(board=board, records=records, vectors=None, model="")


def source_ids(board: Path) -> tuple[list[str], list[str]]:
    """(brief ids, task ids) of a board: folder names, task files and the tasks briefs name."""
    briefs = sorted(p.name for p in (board / "briefs").iterdir() if p.is_dir())
    tasks = {p.stem for p in (board / "tasks").glob("*.json")}
    for b in briefs:
        with contextlib.suppress(OSError, ValueError):
            tasks.add(json.loads((board / "briefs" / b / "brief.json").read_text()).get("task") or "")
    tasks.discard("")
    return briefs, sorted(tasks)


class IdMaker:
    """New ids with the original's date and fresh 6-hex suffixes; copy 0 keeps the original.

    :meth:`prepare` assigns every id in one canonical order (copy, then sorted original), so a clash of
    suffixes (rare) is resolved the same way wherever the same replicas are made.
    """

    def __init__(self, brief_ids, task_ids, copies: int) -> None:
        self.memo: dict[tuple[str, int], str] = {}
        seen: set[str] = set()
        for copy in range(copies):
            for original in [*sorted(set(task_ids)), *sorted(set(brief_ids))]:
                new = original
                salt = 0
                while copy and (new == original or new in seen):
                    digest = hashlib.sha256(f"{original}:{copy}:{salt}".encode()).hexdigest()
                    new = f"{original[: original.rindex('-')]}-{digest[:6]}"
                    salt += 1
                seen.add(new)
                self.memo[(original, copy)] = new

    def __call__(self, original: str, copy: int) -> str:
        return self.memo[(original, copy)]


def replicate(base: Base, total: int, batch: int = 5000) -> Iterator[tuple[list, np.ndarray | None]]:
    """``total`` records (copies of the base records with new ids) and their vectors, in batches."""
    n = len(base.records)
    copies = -(-total // n)
    ids = IdMaker(*source_ids(base.board), copies)
    recs, rows = [], []
    for i in range(total):
        copy, j = divmod(i, n)
        rec = base.records[j]
        recs.append(replace(rec, id=ids(rec.id, copy), task=ids(rec.task, copy) if rec.task else ""))
        rows.append(j)
        if len(recs) == batch or i == total - 1:
            yield recs, (base.vectors[rows] if base.vectors is not None else None)
            recs, rows = [], []


def build_index(store, base: Base, total: int, batch: int = 5000) -> None:
    """Write ``total`` replicated records straight into ``store`` (batched upserts), then optimise."""
    for recs, vecs in replicate(base, total, batch):
        store.upsert(recs, vecs, base.model if vecs is not None else "")
    store.optimize(purge=True)


def _copy_file(src: Path, dst: Path, data: bytes | None = None) -> None:
    # plain bytes, our own mode: the shared board is read-only, and a hard link would be refused
    with open(dst, "wb") as out:
        out.write(src.read_bytes() if data is None else data)


def write_board(dst: Path, total: int, src: Path = BOARD_V1) -> int:
    """Write a board of ``total`` briefs (replicas of ``src``'s) as real folders under ``dst``.

    Tasks are replicated with their briefs (``id`` rewritten); every other file is copied byte for byte.
    Returns the number of files written.
    """
    tasks_src = sorted((src / "tasks").glob("*.json"))
    briefs_src = sorted(p for p in (src / "briefs").iterdir() if p.is_dir())
    task_docs = {p.stem: json.loads(p.read_text()) for p in tasks_src}
    copies_needed = -(-total // len(briefs_src))
    ids = IdMaker(*source_ids(src), copies_needed)
    (dst / "tasks").mkdir(parents=True, exist_ok=True)
    (dst / "briefs").mkdir(parents=True, exist_ok=True)
    written = 0
    for copy in range(copies_needed):
        for task_id, doc in task_docs.items():
            new_id = ids(task_id, copy)
            data = json.dumps({**doc, "id": new_id}, ensure_ascii=False, indent=2).encode()
            _copy_file(Path(), dst / "tasks" / f"{new_id}.json", data)
            written += 1
    for i in range(total):
        copy, j = divmod(i, len(briefs_src))
        folder = briefs_src[j]
        brief_id = ids(folder.name, copy)
        out = dst / "briefs" / brief_id
        out.mkdir()
        for path in folder.rglob("*"):
            rel = path.relative_to(folder)
            if path.is_dir():
                (out / rel).mkdir(exist_ok=True)
                continue
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            if rel == Path("brief.json"):
                doc = json.loads(path.read_text())
                doc["id"] = brief_id
                if doc.get("task"):
                    doc["task"] = ids(doc["task"], copy)
                _copy_file(path, out / rel, json.dumps(doc, ensure_ascii=False, indent=2).encode())
            else:
                _copy_file(path, out / rel)
            written += 1
    return written


def with_vectors(base: Base, embedder, cache_dir: Path | None) -> float | None:
    """Fill ``base.vectors`` with the passage vectors of its records: from ``cache_dir`` when an earlier
    benchmark of this run stored them, else by embedding (and storing). Returns the embedding seconds,
    or None when they came from the cache."""
    import time

    model_id = (
        f"{embedder.name}:{Path(getattr(embedder, 'model_dir', '')).name}"  # the build, not only the name
    )
    key = hashlib.sha256("\n".join([model_id, *(r.embed_hash for r in base.records)]).encode()).hexdigest()[
        :16
    ]
    path = cache_dir / f"base-vectors-{key}.npy" if cache_dir else None
    base.model = embedder.name
    if path is not None and path.exists():
        base.vectors = np.load(path)
        return None
    start = time.perf_counter()
    base.vectors = embedder.embed_passages([r.embed_text for r in base.records])
    seconds = time.perf_counter() - start
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, base.vectors)
    return seconds
