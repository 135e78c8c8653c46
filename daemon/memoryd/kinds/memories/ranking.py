"""Memory relevance: the hybrid search score, lifted a little by importance and recency.

The hybrid search (:func:`memoryd.index.search.search`) decides *whether* a memory matches and gives a
0–1 score. Like memdb (whose ranking adds a recency bonus that decays linearly over 7 days) the memory
tools then re-rank: ``relevance = score + IMPORTANCE_WEIGHT * importance / 10 + RECENCY_WEIGHT *
max(0, 1 - age_days / RECENCY_DAYS)``. The bonuses are small next to the score on purpose: they order
near-equal matches (the critical decision before the passing remark, last week's lesson before last
year's) and never turn a weak match into a strong one. ``relevance`` can therefore exceed 1 slightly.

Memories are short texts, like conversation turns, so their search uses the looser keyword reference
tuned for conversation corpora (:data:`MEMORY_RANKING`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memoryd.index.ranking import Ranking
from memoryd.kinds.memories.files import IMPORTANCE_MAX, Memory

#: Memories are embedded one at a time by a store and in batches by a full sync, and the int8 model's
#: activation scale is per batch: the same memory's cosine to a query moves by a few thousandths between the
#: two. A 0.04 meaning bar let a note that shares one accidental word with the query ("password *manager*"
#: for "which package manager") through when embedded alone; 0.05 clears that noise and leaves LoCoMo
#: recall@5 (0.655) unchanged.
MEMORY_RANKING = Ranking(bm25_reference=1.0, min_lift=0.05)
IMPORTANCE_WEIGHT = 0.10
RECENCY_WEIGHT = 0.05
RECENCY_DAYS = 7.0


def parse_time(iso: str) -> datetime | None:
    """An ISO-8601 timestamp as an aware UTC datetime, or None when unparsable."""
    try:
        dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _bonuses(memory: Memory, now: datetime) -> tuple[float, float]:
    importance = IMPORTANCE_WEIGHT * min(max(memory.importance, 0), IMPORTANCE_MAX) / IMPORTANCE_MAX
    created = parse_time(memory.created_at)
    recency = 0.0
    if created is not None:
        age_days = max(0.0, (now - created).total_seconds() / 86400)
        recency = RECENCY_WEIGHT * max(0.0, 1.0 - age_days / RECENCY_DAYS)
    return importance, recency


def relevance(score: float, memory: Memory, now: datetime) -> float:
    """The re-ranked relevance of a memory whose search score is ``score`` (module docstring)."""
    importance, recency = _bonuses(memory, now)
    return score + importance + recency


def why(hit: Any, memory: Memory, now: datetime) -> dict[str, Any]:
    """Why a memory matched: ``{"keyword", "meaning", "words", "boosts": [[name, amount]...]}`` from
    the search hit's ``why`` (:class:`memoryd.index.search.Why`), plus the importance and recency
    bonuses of this re-rank."""
    base = hit.why
    importance, recency = _bonuses(memory, now)
    boosts = [list(b) for b in (base.boosts if base else ())]
    boosts += [
        [name, amount] for name, amount in (("importance", importance), ("recency", recency)) if amount
    ]
    return {
        "keyword": base.keyword if base else 0.0,
        "meaning": base.meaning if base else 0.0,
        "words": list(base.words) if base else [],
        "boosts": boosts,
    }
