"""Ranking profiles of the hybrid search (:mod:`memoryd.index.search`): plain weights, no index imports,
so tool modules can name a profile without loading LanceDB (the daemon binds its socket before that)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ranking:
    """Weights of the hybrid score; defaults tuned on ``shared/eval/board-v1/dev.jsonl``."""

    meaning_weight: float = 0.4
    # scales the "every query term matched once" BM25 reference: at 0.5 a record holding a third of the
    # query's terms in both text columns (one shared word: ログイン of ログインのリダイレクト) capped at a full
    # keyword score, level with one holding them all; 0.75 keeps board-v1 dev's top-1 and MRR
    bm25_reference: float = 0.75
    z_full: float = 6.0  # meaning z-score at which the meaning list counts fully
    min_z: float = 4.0  # below this, without a real keyword hit, the answer is "nothing found"
    task_vote: float = 0.3  # share of a task's second-best brief added to its best
    status_boost: float = 0.2
    date_boost: float = 0.10
    project_boost: float = 0.2
    # With the model, a record is returned only with evidence of its own (either suffices) and a final
    # score of at least min_score; the bars do not depend on the index's size (memoryd.index.embed.reference_cosines).
    min_lift: float = 0.04  # meaning: its cosine minus the query's mean cosine to the reference passages
    # A small store (every script group padded with reference passages): z against that padded crowd
    # understates a real match, so a best lift of at least lift_sure sets the meaning list's confidence
    # (lift / lift_full) instead; below it the padded z decides, as before.
    lift_sure: float = 0.055
    lift_full: float = 0.10
    min_keyword: float = 0.25  # keyword: its BM25 over the BM25 of a record holding every query term
    min_score: float = 0.1


DEFAULT_RANKING = Ranking()
#: Ranking profile per record kind. Conversation turns are short, so a keyword match on one says more
#: than one inside a brief's long prompt and screen text: their keyword reference is looser (tuned on
#: LoCoMo; briefs on board-v1 dev).
RANKINGS: dict[str, Ranking] = {"brief": DEFAULT_RANKING, "corpus": Ranking(bm25_reference=1.0)}
