"""Reconcile records with the index: add, update, delete — re-embedding only what changed.

The board is the truth; :func:`sync_records` makes the index match a full set of desired records of
some kinds. A record whose content hash is unchanged is not rewritten; one whose embedding text is
unchanged keeps its stored vector (nothing is re-embedded after a restart, or after an edit that
only touched the outcome or the screens).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memoryd.index.records import Record
from memoryd.index.store import IndexStore
from memoryd.logs import get_logger

log = get_logger("memoryd.index.sync")

#: Records per write: each LanceDB write adds a fragment and a version, so writes are batched.
BATCH = 256


@dataclass
class SyncReport:
    """Counts of one reconciliation."""

    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    embedded: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)

    def counts(self) -> dict[str, int]:
        """``{"added", "updated", "deleted", "unchanged"}``: what a log line of this sync says."""
        return {name: getattr(self, name) for name in ("added", "updated", "deleted", "unchanged")}


def _model_name(embedder) -> str:
    return embedder.name if embedder is not None else ""


def write_records(store: IndexStore, records: Sequence[Record], embedder, report: SyncReport) -> None:
    """Upsert ``records``, embedding only those whose stored vector is missing or stale."""
    if not records:
        return
    model = _model_name(embedder)
    stored = store.stored_hashes_for([r.id for r in records])
    reuse_ids = [
        r.id
        for r in records
        if r.id in stored
        and stored[r.id].model
        and stored[r.id].embed_hash == r.embed_hash
        and (embedder is None or stored[r.id].model == model)
    ]
    reuse = store.vectors(reuse_ids) if reuse_ids else {}
    for start in range(0, len(records), BATCH):
        chunk = list(records[start : start + BATCH])
        if embedder is None and not any(r.id in reuse for r in chunk):
            store.upsert(chunk, None, "")
            continue
        need = [r for r in chunk if r.id not in reuse]
        fresh: dict[str, np.ndarray] = {}
        if need and embedder is not None:
            vecs = embedder.embed_passages([r.embed_text for r in need])
            fresh = {r.id: vecs[i] for i, r in enumerate(need)}
            report.embedded += len(need)
        with_vec = [r for r in chunk if r.id in reuse or r.id in fresh]
        without = [r for r in chunk if r.id not in reuse and r.id not in fresh]
        if with_vec:
            mat = np.stack([reuse.get(r.id) if r.id in reuse else fresh[r.id] for r in with_vec])
            kept_model = model or next(stored[r.id].model for r in with_vec if r.id in stored)
            store.upsert(with_vec, mat.astype(np.float32), kept_model)
        if without:
            store.upsert(without, None, "")


def sync_records(
    store: IndexStore,
    desired: Iterable[Record],
    embedder,
    kinds: Sequence[str],
    keep: Collection[str] = (),
) -> SyncReport:
    """Make the index's records of ``kinds`` equal ``desired`` plus ``keep``. Returns what changed.

    ``keep``: ids known unchanged without deriving their records (:mod:`memoryd.index.derive_cache`);
    they are counted as unchanged and never deleted. With ``embedder`` None, new and changed records are
    written keyword-only (``model == ""``) and get their vectors at the next sync with a model.
    """
    report = SyncReport()
    want = {r.id: r for r in desired}
    keep = set(keep) - want.keys()
    report.unchanged += len(keep)
    stored: dict = {}
    for kind in kinds:
        stored.update(store.stored_hashes(kind))
    model = _model_name(embedder)
    todo: list[Record] = []
    for rid, rec in want.items():
        old = stored.get(rid)
        if old is None:
            report.added += 1
            todo.append(rec)
        elif old.hash != rec.content_hash or (embedder is not None and old.model != model):
            report.updated += 1
            todo.append(rec)
        else:
            report.unchanged += 1
    gone = [rid for rid in stored if rid not in want and rid not in keep]
    write_records(store, todo, embedder, report)
    report.deleted = store.delete(gone)
    if report.changed:
        log.info("index_synced", **report.counts(), embedded=report.embedded)
    return report
