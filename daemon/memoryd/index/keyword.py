"""The keyword (BM25) half of the index: LanceDB's full-text indexes and the in-memory tail of newer rows,
searched as one.

What a term is lives in :mod:`memoryd.index.terms`, the tail's BM25 in :mod:`memoryd.index.keyword_tail`, the
IDF statistics in :mod:`memoryd.index.term_stats`; the terms written, the terms asked for, LanceDB's tokens
of both, the tail's scores and the statistics must agree with each other.

*Scoring.*

* LanceDB is asked for indexed rows only (``fast_search``: no scan of rows written since the last index
  refresh, ~0.5 ms per written fragment; after 200 single-row writes a keyword query would take ~100 ms
  instead of ~5, and refreshing the indexes after every write costs hundreds of milliseconds).
* Rows written since are held by :class:`~memoryd.index.keyword_tail.KeywordTail` and scored there, from
  their tokens, with the same BM25 (k1 1.2, b 0.75, a boost per column);
  :meth:`memoryd.index.store.IndexStore.optimize` refreshes the indexes and empties the tail. A row is
  answered once: when the tail holds it, its tail score is used and LanceDB's answer for it (a refresh
  finishing during the query) is dropped. A deleted row leaves the tail before its delete returns, and
  LanceDB does not return deleted rows. Tokens are LanceDB's (:func:`tokenize_many`: the tokenizer of the
  text index, stemming included), so a query matches a tail row exactly when it would match the row once
  indexed. A tail row's IDFs are the statistics over every row, its average lengths LanceDB's; LanceDB uses
  its index's own per-column counts, so a tail row's score is close to, not identical with, what the index
  will give it after the refresh.
* :class:`~memoryd.index.term_stats.TermStats` holds the document frequencies of the keyword terms, which
  LanceDB does not expose. Updated on every write; counted from the table when the index opens, unless a
  saved copy is known to match the table (saved after every :meth:`memoryd.index.store.IndexStore.optimize`,
  keyed by the table's version and row count): counting means splitting every record's text, seconds at
  100,000 records.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memoryd.index.keyword_tail import KeywordTail

if TYPE_CHECKING:  # lancedb loads where it is used
    import pyarrow as pa
    from lancedb.query import MultiMatchQuery
    from lancedb.table import AsyncTable

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
    rows: int = 0,
) -> list[tuple[str, float]]:
    """``[(id, score)]`` best first, at most ``limit``: indexed rows from LanceDB (``query`` None: the
    indexes do not exist yet and the tail holds every row) and tail rows scored in memory.

    ``idf``: a query term's IDF; ``keep``: which of some tail ids pass ``where``; ``avg``: tokens per row
    of each text column over every row (LanceDB scores rows outside its indexes with those); ``rows``: rows
    in the table. When the tail holds at least as many rows as the indexes cover (a new store between two
    refreshes), LanceDB's hits are scored in memory as well: its figures come from the few rows it indexed
    (a term in 1 of 1 indexed rows weighs ~0.3 instead of ~2 among 10), so they would not compare with the
    tail's."""
    # The tail first, as one snapshot: a row it holds is scored from it (LanceDB's answer for it is
    # dropped), and a row it no longer holds left it after a refresh had put it in the indexes, which
    # LanceDB, asked afterwards, then covers. Asked the other way round, a refresh ending between the two
    # would lose the row from both.
    held: frozenset[str] = frozenset()
    newer: list[tuple[str, float]] = []
    weights: dict[str, float] = {}
    if len(tail):
        # a term asked n times weighs n times, as LanceDB scores it
        asked = Counter(query_terms.split())
        terms = list(asked)
        for term, toks in zip(terms, await tokenize_many(table, terms, column), strict=True):
            for tok in toks:
                weights[tok] = max(weights.get(tok, 0.0), idf(term) * asked[term])
        held, newer = tail.score_held(weights, keep, avg)
    indexed: list[tuple[str, float]] = []
    if query is not None:
        # the hits' own texts come with them when they are to be rescored: asked for by id afterwards, they
        # took a scan of every fragment the single-row writes since the last refresh left (~0.3 s at 1,600)
        rescore = bool(held) and len(held) >= rows - len(held)
        columns = ["id", "_score", *(tail.columns if rescore else ())]
        q = table.query().nearest_to_text(query).select(columns).limit(limit + min(len(held), limit))
        q = q.fast_search()
        if where:
            q = q.where(where)  # a filter before ranking, as the sync API's prefilter=True
        got = await q.to_arrow()
        pairs = zip(got.column("id").to_pylist(), got.column("_score").to_pylist(), strict=True)
        indexed = [(i, float(s)) for i, s in pairs if i not in held]
        if indexed and rescore:
            indexed = await _rescored(table, tail, got, held, weights, avg)
    if not newer:
        return indexed[:limit]
    merged = sorted([*indexed, *newer], key=lambda e: (-e[1], e[0]))
    return merged[:limit]


async def _rescored(
    table: AsyncTable,
    tail: KeywordTail,
    got: pa.Table,
    held: frozenset[str],
    weights: dict[str, float],
    avg: Sequence[float] | None,
) -> list[tuple[str, float]]:
    """The indexed rows of LanceDB's answer ``got`` (an Arrow table with ``id`` and the tail's columns; rows
    in ``held`` left out) scored as the tail scores its own (same tokens, IDFs and lengths), best first."""
    ids = got.column("id").to_pylist()
    keep = [n for n, rid in enumerate(ids) if rid not in held]
    per_column = []
    for c in tail.columns:
        texts = got.column(c).to_pylist()
        per_column.append(await tokenize_many(table, [texts[n] or "" for n in keep], c))
    scratch = KeywordTail(tail.columns, tail.boosts)
    for k, n in enumerate(keep):
        scratch.put(ids[n], [col[k] for col in per_column])
    return scratch.score_held(weights, lambda matched: set(matched), avg)[1]


def tokens(table, texts: Sequence[str], column: str) -> list[list[str]]:
    """:func:`tokenize_many` for a sync LanceDB table (its text index must exist); blocks."""
    from lancedb.background_loop import LOOP

    return asyncio.run_coroutine_threadsafe(tokenize_many(table._table, texts, column), LOOP.loop).result()


def unindexed(table) -> int:
    """Rows of a sync LanceDB table that its text indexes do not cover (0 for another table layout)."""
    from lancedb.background_loop import LOOP
    from lancedb.table import AsyncTable

    inner = getattr(table, "_table", None)
    if not isinstance(inner, AsyncTable):
        return 0

    async def count() -> int:
        names = [i.name for i in await inner.list_indices() if i.index_type == "FTS"]
        stats = [await inner.index_stats(n) for n in names]
        return max((s.num_unindexed_rows for s in stats if s is not None), default=0)

    return asyncio.run_coroutine_threadsafe(count(), LOOP.loop).result()
