"""The BM25 half of a search: LanceDB's full-text indexes plus the in-memory tail of newer rows.

LanceDB is asked for indexed rows only (``fast_search``: no scan of rows written since the last index
refresh, ~0.5 ms per written fragment); rows written since are scored by :class:`KeywordTail`
(:mod:`memoryd.index.tail`). A row is answered once: when the tail holds it, its tail score is used and
LanceDB's answer for it (a refresh finishing during the query) is dropped. A deleted row leaves the
tail before its delete returns, and LanceDB does not return deleted rows.

Tokens are LanceDB's (:func:`tokenize_many`: the tokenizer of the text index, stemming included), so a
query matches a tail row exactly when it would match the row once indexed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from lancedb.background_loop import LOOP
from lancedb.query import MultiMatchQuery
from lancedb.table import AsyncTable

from memoryd.index.tail import KeywordTail

#: Joins texts for one tokenizer call (one call costs ~0.6 ms, its text's length hardly matters): a word
#: no text holds (term strings are lower-case letters, digits and a few marks; this has no vowel run a
#: stemmer would cut).
SEPARATOR = "qzxsepzxq"


async def tokenize_many(table: AsyncTable, texts: Sequence[str], column: str) -> list[list[str]]:
    """One token list per text, as the full-text index of ``column`` tokenises it (one call)."""
    if not texts:
        return []
    toks = await table.tokenize(f" {SEPARATOR} ".join(texts), column=column)
    out: list[list[str]] = [[]]
    for tok in toks:
        if tok.text == SEPARATOR:
            out.append([])
        else:
            out[-1].append(tok.text)
    if len(out) != len(texts):  # a text held the separator after all: one call each
        out = []
        for text in texts:
            out.append([t.text for t in await table.tokenize(text, column=column)])
    return out


async def search(
    table: AsyncTable,
    tail: KeywordTail,
    query: MultiMatchQuery | None,
    query_terms: str,
    where: str | None,
    limit: int,
    idf: Callable[[str], float],
    keep: Callable[[list[str]], set[str]],
    column: str,
    avg: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """``[(id, score)]`` best first, at most ``limit``: indexed rows from LanceDB (``query`` None: the
    indexes do not exist yet and the tail holds every row) and tail rows scored in memory.

    ``idf``: a query term's IDF; ``keep``: which of some tail ids pass ``where``; ``avg``: tokens per row
    of each text column over every row (LanceDB scores rows outside its indexes with those)."""
    held = tail.ids()  # before LanceDB is asked: a row leaving the tail meanwhile is then in the indexes
    indexed: list[tuple[str, float]] = []
    if query is not None:
        q = table.query().nearest_to_text(query).select(["id", "_score"]).limit(limit + min(len(held), limit))
        q = q.fast_search()
        if where:
            q = q.where(where)  # a filter before ranking, as the sync API's prefilter=True
        got = await q.to_arrow()
        pairs = zip(got.column("id").to_pylist(), got.column("_score").to_pylist(), strict=True)
        indexed = [(i, float(s)) for i, s in pairs if i not in held]
    if not held:
        return indexed[:limit]
    terms = query_terms.split()
    weights: dict[str, float] = {}
    for term, toks in zip(terms, await tokenize_many(table, terms, column), strict=True):
        for tok in toks:
            weights[tok] = max(weights.get(tok, 0.0), idf(term))
    newer = tail.score(weights, keep, avg)
    merged = sorted([*indexed, *newer], key=lambda e: (-e[1], e[0]))
    return merged[:limit]


def tokens(table, texts: Sequence[str], column: str) -> list[list[str]]:
    """:func:`tokenize_many` for a sync LanceDB table (its text index must exist); blocks."""
    return asyncio.run_coroutine_threadsafe(tokenize_many(table._table, texts, column), LOOP.loop).result()


def unindexed(table) -> int:
    """Rows of a sync LanceDB table that its text indexes do not cover (0 for another table layout)."""
    inner = getattr(table, "_table", None)
    if not isinstance(inner, AsyncTable):
        return 0

    async def count() -> int:
        names = [i.name for i in await inner.list_indices() if i.index_type == "FTS"]
        stats = [await inner.index_stats(n) for n in names]
        return max((s.num_unindexed_rows for s in stats if s is not None), default=0)

    return asyncio.run_coroutine_threadsafe(count(), LOOP.loop).result()
