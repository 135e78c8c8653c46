"""Hybrid search: one function that the MCP tools, the CLI and ``memoryd eval`` all call.

Gathering the two candidate lists is :mod:`memoryd.index.candidates`; scoring them is here. They share
their figures (:class:`~memoryd.index.candidates.Candidates`) and change together.

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
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

import numpy as np

from memoryd.index import intent, owned
from memoryd.index.candidates import Candidates, gather
from memoryd.index.columns import Filter
from memoryd.index.ranking import DEFAULT_RANKING, RANKINGS, Ranking
from memoryd.index.redact import PLACEHOLDERS, redact
from memoryd.index.searcher import SearchQuery
from memoryd.index.store import IndexStore
from memoryd.index.table import TEXT_COLUMNS
from memoryd.index.terms import term_string


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
