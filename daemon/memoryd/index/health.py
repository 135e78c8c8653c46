"""Index facts for ``healthcheck``: records by kind, rows the keyword index does not cover yet,
rows still without a vector, and the table version. Read-only; LanceDB stays inside ``memoryd.index``.
"""

from __future__ import annotations

from typing import Any

from memoryd.index.store import IndexStore
from memoryd.index.table import TEXT_COLUMNS


def index_health(store: IndexStore) -> dict[str, Any]:
    """``{"records", "by_kind": {kind: n}, "unindexed_rows": n | None, "without_vector": n, "version"}``.

    ``unindexed_rows``: rows written since the full-text (BM25) indexes were last rebuilt, the largest
    over the keyword columns (LanceDB ``index_stats``); they are still searched (flat), only slower.
    None before the first index exists. ``without_vector``: rows searchable by keyword only so far.
    """
    table = store._table  # noqa: SLF001 - the store's own table, read-only statistics
    by_kind = store.counts_by_kind()
    unindexed: int | None = None
    for cfg in table.list_indices():
        if cfg.index_type == "FTS" and cfg.columns and cfg.columns[0] in TEXT_COLUMNS:
            stats = table.index_stats(cfg.name)
            if stats is not None:
                unindexed = max(unindexed or 0, int(stats.num_unindexed_rows))
    without = table.count_rows("model = ''")
    return {
        "records": sum(by_kind.values()),
        "by_kind": by_kind,
        "unindexed_rows": unindexed,
        "without_vector": int(without),
        "version": int(table.version),
    }
