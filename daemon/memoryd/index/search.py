"""Hybrid search: one function that the MCP tools, the CLI and ``memoryd eval`` all call.

Over 400 lines: gathering the two candidate lists and scoring them share their figures (:class:`Candidates`)
and change together.

Two candidate lists are fetched from the same LanceDB table: BM25 over our keyword terms and cosine
nearest neighbours of the query embedding. Each list is scaled to 0–1 *by its own confidence*, then
mixed by weight (meaning ≈ 0.8), not by rank fusion: a top rank won by one stray keyword must not
count as much as a strong meaning match (lessons measured in ``shared/eval/README.md``).

* meaning: e5 cosines sit in a narrow band, so each is scaled against the query's own candidate
  distribution (``(cos − mean) / (best − mean)``) and the list's weight shrinks when the best hit does
  not stand out from the crowd (a z-score); a script group with fewer than 25 records fills that
  distribution with the closest reference passages (:func:`memoryd.index.embed.reference_cosines`), so one record is
  not its own crowd;
* keyword: BM25 scores are divided by a saturating reference, so one weak accidental match stays
  weak, and a record matching many rare query terms scores near 1;
* briefs vote for their task: a task whose several briefs match is a better answer than a stray brief;
  but a brief whose only keyword match is its task's title (:mod:`memoryd.index.owned`) ranks below every
  record matching some query word on its own: its task lifts it, it does not outrank them;
* a query that is only error codes or identifiers ("E4012", "ERR_SSL_PROTOCOL_ERROR", "0x80070005") has no
  meaning the model can read: when the index holds such a code, the records holding it whole come first,
  ranked by keywords alone, and a record holding only its parts ("ssl", "error") after them;
* small priors: open tasks for "what is still open" queries, a named month for "that thing in August";
* a query that asks only what is open ("what's still open?", perhaps naming a project) has no subject to
  match: it lists the newest record of each open task, newest first (:func:`_open_work`);
* a query of one word that is no keyword term (a single Latin letter, a filler word) finds nothing; one CJK
  character or one emoji is a term (:mod:`memoryd.index.terms`);
* nothing is returned when neither list is confident (a random string, a redacted secret's fragment);
  with the model, a record is returned only with evidence of its own — a cosine clearly above the query's
  cosines to the reference passages, or a keyword match worth a good share of the query — and a final
  score of at least :attr:`~memoryd.index.ranking.Ranking.min_score`. Neither bar depends on how many
  records the index holds, so a store of one record answers an unrelated query with nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime

import numpy as np

from memoryd.index import intent, owned
from memoryd.index.columns import Filter
from memoryd.index.embed import reference_cosines
from memoryd.index.ranking import DEFAULT_RANKING, RANKINGS, Ranking
from memoryd.index.redact import PLACEHOLDERS, redact
from memoryd.index.searcher import SearchQuery
from memoryd.index.store import IndexStore
from memoryd.index.table import TEXT_BOOSTS, TEXT_COLUMNS
from memoryd.index.terms import meaning_text, term_string

CANDIDATES = 50
#: An id restriction (``SearchQuery.ids``) up to this size also filters LanceDB's BM25 half before ranking
#: (an ``id IN (...)`` prefilter: ~9 ms for 100 ids, ~32 ms for 2,000 at 100,000 rows, load 9); a larger one
#: filters the in-memory nearest neighbours only, and the BM25 half ranks :data:`WIDE_KEYWORD` rows
#: unfiltered and keeps those in the set.
KEYWORD_IDS_MAX = 500
WIDE_KEYWORD = 1000
GROUP_CANDIDATES = 25


@dataclass(frozen=True)
class Why:
    """Why a record matched (``search(..., reasons=True)``): the parts of its score before scaling.

    ``keyword``: its BM25 over that of a record holding every query term, 0–1; ``meaning``: its cosine
    scaled within the query's candidates times the meaning list's confidence, 0–1 (0 keyword-only);
    ``boosts``: ``(name, amount)`` for each prior that applied (``"open task"``, ``"named month"``,
    ``"named project"``, ``"task vote"``; a query asking only what is open: ``("open task", 1.0)`` alone);
    ``words``: the query's words found in the record's text."""

    keyword: float
    meaning: float
    boosts: tuple[tuple[str, float], ...] = ()
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hit:
    """One search result. ``score`` is in 0–1 (higher is better); ``line`` is one line of what was said
    (redacted); ``date`` is the record's ISO-8601 creation time; ``why`` only when asked for."""

    id: str
    kind: str
    task: str
    project: str
    status: str
    date: str
    title: str
    line: str
    score: float
    why: Why | None = None

    def as_dict(self) -> dict:
        """Every field but ``why``, in field order, ``score`` rounded to 4 places."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "why"}
        return out | {"score": round(self.score, 4)}


@dataclass
class SearchResult:
    """``hits`` best first; ``mode`` is "hybrid" or "keyword" (no model, or model not ready).

    ``open_listing``: None unless the query asks only what is still open
    (:func:`memoryd.index.intent.open_listing`); then the project the query names (``""``: none), whether
    or not open records were found to list (none: ``hits`` are the ranking's)."""

    hits: list[Hit] = field(default_factory=list)
    mode: str = "hybrid"
    query_redactions: int = 0
    open_listing: str | None = None


def _where(query: SearchQuery) -> Filter:
    """What every result of ``query`` must equal, as the store's filter (an empty field filters nothing)."""
    return (
        Filter()
        .where(project=query.project or None, kind=query.kind or None, status=query.status or None)
        .where(project=query.scope or None)
    )


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
    :func:`_where` gives them; ``ids``: only these records (None: any), see :data:`KEYWORD_IDS_MAX`."""
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


def score(
    c: Candidates,
    ranking: Ranking = DEFAULT_RANKING,
    group_by_task: bool = True,
    explain: dict | None = None,
    reasons: bool = False,
) -> list[Hit]:
    """Rank candidates; ``[]`` means "nothing found" (see the module docstring). ``reasons``: each hit
    carries its :class:`Why` (without ``words``)."""
    ref = c.ref * ranking.bm25_reference
    kw = {i: min(1.0, s / ref) for i, s in c.bm25.items()} if ref > 0 else {}
    m_scores: dict[str, float] = {}
    m_conf = 0.0
    if c.cos:
        pool = np.array(c.pool or list(c.cos.values()), dtype=np.float64)
        mean, std = float(pool.mean()), float(pool.std()) or 1e-6
        best = max(c.cos.values())
        z = (best - mean) / std if len(pool) > 2 else ranking.z_full
        m_conf = min(1.0, max(0.0, z / ranking.z_full))
        # A small store's crowd is padded with the reference passages nearest the query, often on its very
        # subject, so z understates a real match there (a Japanese question on an English note: z ~1.5-3).
        # The best lift is the size-independent measure; each record still needs its own evidence.
        lifted = max(c.lift.values(), default=0.0) if c.small else 0.0
        if lifted >= ranking.lift_sure:
            m_conf = max(m_conf, min(1.0, lifted / ranking.lift_full))
        span = max(best - mean, 1e-6)
        m_scores = {i: min(1.0, max(0.0, (v - mean) / span)) for i, v in c.cos.items()}
        if explain is not None:
            explain.update(z=z, best_cos=best, mean_cos=mean)
        if not c.known and z < ranking.min_z and lifted < ranking.lift_sure:
            # no query word occurs anywhere in the index and nothing stands out by meaning:
            # "nothing found" (a random string, a redacted secret's fragment, a forgotten screen)
            return []
    if explain is not None:
        explain.update(k_top=max(kw.values(), default=0.0), n_kw=len(kw))
    w = ranking.meaning_weight if c.has_vectors and not c.exact else 0.0
    exact_ref = c.exact_ref * ranking.bm25_reference
    calibrated = bool(c.lift)  # the model's reference passages were there: absolute bars apply
    why: dict[str, Why] = {}
    scored: list[tuple[str, dict, float]] = []
    for i, row in c.rows.items():
        if calibrated and i not in c.exact and not _evidence(c, i, ranking):
            continue
        k = kw.get(i, 0.0)
        if c.exact:  # holding the code itself outranks holding its parts
            k = 0.5 + 0.5 * min(1.0, c.exact[i] / exact_ref) if i in c.exact else 0.5 * k
        s = w * m_scores.get(i, 0.0) * m_conf + (1 - w) * k
        boosts = []
        if c.wants_open and row["status"] == "open":
            s += ranking.status_boost
            boosts.append(("open task", ranking.status_boost))
        if c.months and row["created_at"][:7] in c.months:
            s += ranking.date_boost
            boosts.append(("named month", ranking.date_boost))
        if c.projects.get(row["project"]):
            s += ranking.project_boost * c.projects[row["project"]]
            boosts.append(("named project", ranking.project_boost * c.projects[row["project"]]))
        if reasons:
            why[i] = Why(keyword=k, meaning=m_scores.get(i, 0.0) * m_conf if w else 0.0, boosts=tuple(boosts))
        # raw BM25 breaks ties among capped keyword scores (keyword-only mode)
        s += 1e-6 * min(c.bm25.get(i, 0.0), 1000.0) / 1000.0
        scored.append((i, row, s))
    if group_by_task:
        bonus = _task_bonus(((row["task"], s) for _, row, s in scored), ranking.task_vote)
        scored = [
            (i, row, s + bonus.get(row["task"], 0.0)) if row["task"] else (i, row, s) for i, row, s in scored
        ]
        for i, row, _ in scored if reasons else ():
            if bonus.get(row["task"]):
                w_i = why[i]
                why[i] = Why(w_i.keyword, w_i.meaning, (*w_i.boosts, ("task vote", bonus[row["task"]])))
    if calibrated:
        scored = [e for e in scored if e[2] >= ranking.min_score]
    if c.inherited:
        scored = owned.below_own(scored, c.inherited, set(kw))
    scored.sort(key=lambda e: (-e[2], e[0]))
    return [
        Hit(
            id=i,
            kind=row["kind"],
            task=row["task"],
            project=row["project"],
            status=row["status"],
            date=row["created_at"],
            title=row["title"],
            line=row["line"],
            score=s,
            why=why.get(i),
        )
        for i, row, s in scored
    ]


def search(store: IndexStore, embedder, query: SearchQuery, explain: dict | None = None) -> SearchResult:
    """Search the index for ``query``: any text (quotes, colons, braces, a lone ``(``, URLs, blanks) gives a
    result list, possibly empty, never an error.

    ``embedder`` is a :class:`memoryd.index.embed.Embedder` or None (keyword-only). The text is redacted
    first, so a guessed secret can never be confirmed. ``explain``: filled with the ranking's inner
    figures (tuning). Raises only for a broken index (LanceDB errors propagate).
    """
    limit = max(1, min(int(query.limit), 100))
    red = redact(query.text or "")
    text = " ".join(PLACEHOLDERS.sub(" ", red.text).split())
    result = SearchResult(
        mode="hybrid" if embedder is not None else "keyword", query_redactions=sum(red.counts.values())
    )
    if not text or store.count() == 0:
        return result
    result.open_listing = intent.open_listing(text, store.projects())
    listed = _open_work(store, query, result.open_listing, limit)
    if listed:
        result.hits = _with_words(store, text, listed) if query.reasons else listed
        return result
    if len(text.split()) == 1 and not term_string(text, query=True):
        # one letter ("a") or one filler word ("the"): no subject, and the model's reading of it is noise
        return result
    cands = gather(store, embedder, text, _where(query), query.as_of, query.ids)
    ranking = query.ranking or RANKINGS.get(query.kind or "brief", DEFAULT_RANKING)
    hits = score(cands, ranking, query.group_by_task, explain, query.reasons)
    top = hits[0].score if hits else 0.0
    result.hits = [_scaled(h, top) for h in hits[:limit]]
    if query.reasons:
        result.hits = _with_words(store, text, result.hits)
    return result


def _open_work(store: IndexStore, query: SearchQuery, project: str | None, limit: int) -> list[Hit]:
    """When the query asks only what is still open (``project``: what
    :func:`memoryd.index.intent.open_listing` said of it, not None): the newest record of each open task
    passing the query's filters and ``project`` (of every open record, without ``group_by_task``), newest
    first, each scored 1.0; ``[]`` otherwise, or when nothing open passes them (the ranking then answers as
    for any query)."""
    if project is None:
        return []
    where = _where(query).where(status="open", project=project or None, id=query.ids)
    ids = store.newest(where, limit, per="task" if query.group_by_task else None)
    rows = store.rows(ids)
    why = Why(keyword=0.0, meaning=0.0, boosts=(("open task", 1.0),)) if query.reasons else None
    return [
        Hit(
            i,
            r["kind"],
            r["task"],
            r["project"],
            r["status"],
            r["created_at"],
            r["title"],
            r["line"],
            1.0,
            why,
        )
        for i in ids
        if (r := rows.get(i))
    ]


def _with_words(store: IndexStore, text: str, hits: list[Hit]) -> list[Hit]:
    """``hits`` whose :class:`Why` names the query's words (as typed) whose terms occur in the record."""
    words = []
    for word in dict.fromkeys(text.split()):
        terms = set(term_string(word, query=True).split())
        if terms:
            words.append((word, terms))
    rows = store.rows([h.id for h in hits if h.why is not None], ("id", *TEXT_COLUMNS))
    # a word only the record's group (a brief's task title) holds is not one of its own
    out = []
    for h in hits:
        row = rows.get(h.id)
        if h.why is None or row is None:
            out.append(h)
            continue
        have = set(owned.own_text(row).split())
        found = tuple(word for word, terms in words if terms & have)
        out.append(Hit(**{**h.__dict__, "why": Why(h.why.keyword, h.why.meaning, h.why.boosts, found)}))
    return out


def _evidence(c: Candidates, i: str, ranking: Ranking) -> bool:
    """Record ``i`` matches by meaning (lift) or by keywords on its own, whatever else the index holds."""
    if c.lift.get(i, -1.0) >= ranking.min_lift:
        return True
    return c.ref > 0 and c.bm25.get(i, 0.0) / c.ref >= ranking.min_keyword


def _task_bonus(scores: Iterable[tuple[str, float]], share: float) -> dict[str, float]:
    """task -> ``share`` of its second-best brief score: briefs vote for their task."""
    by_task: dict[str, list[float]] = {}
    for task, s in scores:
        if task:
            by_task.setdefault(task, []).append(s)
    return {t: sorted(v, reverse=True)[1] * share if len(v) > 1 else 0.0 for t, v in by_task.items()}


def _scaled(hit: Hit, top: float) -> Hit:
    # report a 0–1 score: raw sums of boosts can exceed 1
    score = hit.score / top if top > 1.0 else hit.score
    return Hit(**{**hit.__dict__, "score": max(0.0, min(1.0, score))}) if not math.isnan(score) else hit
