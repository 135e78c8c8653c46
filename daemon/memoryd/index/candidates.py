"""The two candidate lists of one hybrid search query, fetched before any weighting (:class:`Candidates`).

:func:`gather` asks the store for BM25 hits over the query's keyword terms (misspelled terms respelled as
the indexed terms they may stand for, :mod:`memoryd.index.typos`) while it embeds the query, then for the
nearest neighbours per script group, z-scoring each group's cosines against its own crowd (filled with
the closest reference passages when it has fewer than :data:`GROUP_CANDIDATES` records). Ranking them is
:func:`memoryd.index.search.score`'s job, so it can be tuned offline on the same candidates.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from memoryd.index import intent, owned
from memoryd.index.columns import Filter
from memoryd.index.embed import reference_cosines
from memoryd.index.store import IndexStore
from memoryd.index.table import TEXT_BOOSTS
from memoryd.index.terms import meaning_text, term_string

CANDIDATES = 50
#: An id restriction (``SearchQuery.ids``) up to this size also filters LanceDB's BM25 half before ranking
#: (an ``id IN (...)`` prefilter: ~9 ms for 100 ids, ~32 ms for 2,000 at 100,000 rows, load 9); a larger one
#: filters the in-memory nearest neighbours only, and the BM25 half ranks :data:`WIDE_KEYWORD` rows
#: unfiltered and keeps those in the set.
KEYWORD_IDS_MAX = 500
WIDE_KEYWORD = 1000
GROUP_CANDIDATES = 25


@dataclass
class Candidates:
    """What both halves found for one query, before any weighting (so ranking can be tuned offline).

    ``bm25``: id -> raw BM25; ``ref``: BM25 of a record holding every query term once (sum of IDFs x
    main boost); ``cos``: id -> cosine; ``pool``: the cosines of the nearest-neighbour list;
    ``known``: some query term occurs in the index (as written, by its stem: a BM25 hit, or misspelled:
    ``spelled`` maps such a term to the indexed terms asked for in its place);
    ``rows``: stored columns of every candidate;
    ``lift``: id -> cosine minus the query's mean cosine to the reference passages of the record's script
    (empty without the model); ``small``: every script group among the nearest neighbours had its statistics
    filled with reference passages (each holds fewer than :data:`GROUP_CANDIDATES` matching records);
    ``inherited``: the keyword hits matching only through their group's terms (:func:`memoryd.index.owned.inherited`);
    ``exact``: id -> BM25 of the query's codes alone when the query is only codes the index holds
    (:func:`memoryd.index.intent.codes`), with ``exact_ref`` that of a record holding each once on a screen.
    """

    text: str = ""
    bm25: dict[str, float] = field(default_factory=dict)
    ref: float = 0.0
    cos: dict[str, float] = field(default_factory=dict)
    pool: list[float] = field(default_factory=list)
    known: bool = False
    has_vectors: bool = False
    rows: dict[str, dict] = field(default_factory=dict)
    wants_open: bool = False
    months: set[str] = field(default_factory=set)
    projects: dict[str, float] = field(default_factory=dict)
    lift: dict[str, float] = field(default_factory=dict)
    small: bool = False
    spelled: dict[str, list[str]] = field(default_factory=dict)
    inherited: set[str] = field(default_factory=set)
    exact: dict[str, float] = field(default_factory=dict)
    exact_ref: float = 0.0


def gather(
    store: IndexStore,
    embedder,
    text: str,
    filters: Filter,
    as_of: datetime | None = None,
    ids: frozenset[str] | None = None,
) -> Candidates:
    """Fetch both candidate lists for already-redacted, non-empty ``text``; ``filters`` as
    :func:`memoryd.index.search._where` gives them; ``ids``: only these records (None: any), see :data:`KEYWORD_IDS_MAX`."""
    c = Candidates(text=text)
    qterms, c.spelled = _respelled(store, term_string(text, query=True))
    near_filters = filters if ids is None else filters.where(id=ids)
    wide = ids is not None and len(ids) > KEYWORD_IDS_MAX
    # BM25 runs in LanceDB's threads while the query is embedded here
    if wide:
        pending = store.keyword_start(qterms, filters, WIDE_KEYWORD)
    else:
        pending = store.keyword_start(qterms, near_filters, CANDIDATES)

    def keyword_hits() -> dict[str, float]:
        found = pending.result()
        return dict(found if not wide else [(i, v) for i, v in found if i in ids][:CANDIDATES])

    # a misspelled term weighs as the term it stands for (the rarest of them), not as a term nobody wrote;
    # a term asked n times (a loanword's English word) n times, as BM25 scores it
    offered = {t for offers in c.spelled.values() for t in offers}
    written = Counter(t for t in qterms.split() if t not in offered)
    c.ref = TEXT_BOOSTS[0] * sum(
        n * (max(store.stats.idf(o) for o in c.spelled[t]) if t in c.spelled else store.stats.idf(t))
        for t, n in written.items()
    )
    c.known = any(store.stats.df.get(t, 0) > 0 for t in qterms.split())
    if embedder is not None:
        qvec = embedder.embed_queries([meaning_text(text)])[0]
        by_group = store.nearest_by(qvec, CANDIDATES, near_filters, per="lang")
        c.bm25 = keyword_hits()
        # Cosines are compared within each script group (a query scores higher against any text in
        # its own script): each group's list is z-scored against its own nearest neighbours, filled up
        # with the closest reference passages when the group has too few records to be a crowd.
        ref = reference_cosines(embedder, qvec)
        ref_mean = {g: float(v.mean()) for g, v in ref.items() if len(v)}
        stats: dict[str, tuple[float, float]] = {}
        raw: dict[str, float] = {}
        stand_ins: list[tuple[str, float]] = []
        for group in ("latin", "cjk"):
            near = by_group.get(group)
            if not near:
                continue
            own = [cos for _, cos in near[:GROUP_CANDIDATES]]
            fill = ref.get(group, np.empty(0))[: max(0, GROUP_CANDIDATES - len(own))]
            values = np.concatenate([np.array(own, dtype=np.float64), fill])
            stats[group] = (float(values.mean()), float(values.std()) or 1e-3)
            stand_ins.extend((group, float(v)) for v in fill)
            raw.update(near)
        nearest_ids = set(raw)
        c.has_vectors = bool(raw)
        c.small = bool(stats) and {g for g, _ in stand_ins} == set(stats)
        missing = [i for i in c.bm25 if i not in raw]
        if missing:
            for i, v in store.vectors(missing).items():
                raw[i] = float(v @ qvec)
        # one row fetch for every candidate: it carries the script group used just below
        c.rows = store.rows(list(set(c.bm25) | set(raw)))
        for i, cos in raw.items():
            group = c.rows.get(i, {}).get("lang", "latin")
            mean, std = stats.get(group) or next(iter(stats.values()), (cos, 1e-3))
            c.cos[i] = (cos - mean) / std
            if group in ref_mean:
                c.lift[i] = cos - ref_mean[group]
        pool = [v for i, v in c.cos.items() if i in nearest_ids]
        pool += [(v - stats[g][0]) / stats[g][1] for g, v in stand_ins]
        c.pool = sorted(pool, reverse=True)[:CANDIDATES]
    else:
        c.bm25 = keyword_hits()
        c.rows = store.rows(list(c.bm25))
    # The statistics count our terms as written, LanceDB's BM25 matches their stems: "webhook retry" matches
    # "retries webhooks", whose terms are counted as "retries" and "webhooks". A BM25 hit is a query word in
    # the index all the same.
    c.known = c.known or bool(c.bm25)
    codes = [t for t in intent.codes(text) if store.stats.df.get(t, 0) > 0]
    if codes:
        found = store.keyword(
            " ".join(codes), filters if wide else near_filters, WIDE_KEYWORD if wide else CANDIDATES
        )
        c.exact = dict([(i, v) for i, v in found if ids is None or i in ids][:CANDIDATES])
        # a code on a screen says as much as a code said: the reference is the lighter column's
        c.exact_ref = TEXT_BOOSTS[-1] * sum(store.stats.idf(t) for t in codes)
        c.rows.update(store.rows([i for i in c.exact if i not in c.rows]))
    c.inherited = owned.inherited(store, qterms, [i for i in c.bm25 if c.rows.get(i, {}).get("task")])
    c.wants_open = intent.asks_open(text)
    c.months = intent.months(text, as_of or datetime.now(UTC))
    c.projects = intent.projects(set(qterms.split()), store.projects())
    return c


def _respelled(store: IndexStore, qterms: str) -> tuple[str, dict[str, list[str]]]:
    """``qterms`` with the indexed terms each unknown term may be a misspelling of added after it
    (:mod:`memoryd.index.typos`), or the pairs holding the one CJK character that is the whole query, and
    ``{term: those terms}`` for the terms that had some."""
    df = store.stats.df
    unknown = [t for t in dict.fromkeys(qterms.split()) if df.get(t, 0) <= 0]
    offers = {t: near for t in unknown if (near := store.typos.near(t, df))}
    # a query of one CJK character (猫) asks for a word that was indexed in pairs: those holding it stand for it
    if len(qterms) == 1 and (pairs := store.typos.containing(qterms, df)):
        offers[qterms] = pairs
    if not offers:
        return qterms, {}
    # another form of the same word ("notes" for "note") is LanceDB's stemmer's to match, not a typo
    words = list({w for t, near in offers.items() for w in (t, *near)})
    stems = store.stems(words)
    if stems:
        stem = dict(zip(words, stems, strict=True))
        offers = {t: kept for t, near in offers.items() if (kept := [w for w in near if stem[w] != stem[t]])}
    out: list[str] = []
    for t in qterms.split():
        out.append(t)
        out.extend(offers.get(t, ()))
    return " ".join(out), offers
