"""Which task a captured prompt belongs to: the open task it continues, or a new one.

The caller searches the prompt among the briefs of the project's **open** tasks with the hybrid search
(the same one ``search_briefs`` uses) and hands the best score of each task here; :func:`choose_task`
decides, with no I/O:

* in an agent session that already filed a prompt into an open task of this project (``current``), the
  prompt stays there unless the developer clearly changed subject: another open task matches at least
  :attr:`Thresholds.switch` and beats the current task by :attr:`Thresholds.margin`, or the prompt is a
  self-contained request (at least :attr:`Thresholds.new_words` words) that matches neither the current
  task nor any other (best score below :attr:`Thresholds.fresh`), which starts a new task;
* otherwise it joins the best-matching open task when that match is clear (at least
  :attr:`Thresholds.join`), else starts a new task.

The default thresholds are tuned on a labelled set (``memoryd eval --filing``: 456 scored prompts from
board-v1 and LoCoMo, a grid search on a tuning split, reported on a held-out split; README "Filing
accuracy"). Scores of the two search modes are not on one scale, hence two profiles. What the tuning says:
with the model a continuing prompt often scores low against its own task (a hybrid hit needs evidence of
its own, so many prompts match nothing), so ``join`` is low; a session leaves its task only for a clear
winner (``margin``); telling a new subject from a follow-up by scores alone fails more often than not, so
with the model the new-subject rule is off (``fresh`` 0) and a session's prompts stay in its task.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """Scores are the search's 0–1 scores; ``new_words`` counts whitespace-separated words."""

    join: float
    switch: float
    margin: float
    fresh: float
    new_words: int


#: Tuned (see the module docstring); "hybrid" = model warm, "keyword" = not.
DEFAULTS: dict[str, Thresholds] = {
    "hybrid": Thresholds(join=0.15, switch=0.35, margin=0.3, fresh=0.0, new_words=12),
    "keyword": Thresholds(join=0.4, switch=0.6, margin=0.4, fresh=0.4, new_words=16),
}


@dataclass(frozen=True)
class Filing:
    """The decision: ``task`` to join (None = start a new task), the ``score`` behind it and why."""

    task: str | None
    score: float
    reason: str  # "session" | "switched" | "matched" | "new" | "new-subject"


def task_scores(hits: Iterable[tuple[str, float]], allowed: set[str] | None = None) -> dict[str, float]:
    """``{task: best score}`` from ``(task, score)`` hits (briefs), keeping only ``allowed`` tasks."""
    best: dict[str, float] = {}
    for task, score in hits:
        if task and (allowed is None or task in allowed) and score > best.get(task, -1.0):
            best[task] = score
    return best


def choose_task(scores: dict[str, float], current: str | None, words: int, thresholds: Thresholds) -> Filing:
    """Decide where a prompt goes (rules in the module docstring).

    ``scores``: best score per open task of the project; ``current``: the session's open task in this
    project, or None; ``words``: the prompt's word count.
    """
    best_task, best = max(scores.items(), key=lambda kv: (kv[1], kv[0]), default=(None, 0.0))
    if current is not None:
        here = scores.get(current, 0.0)
        if (
            best_task is not None
            and best_task != current
            and best >= thresholds.switch
            and best - here >= thresholds.margin
        ):
            return Filing(best_task, best, "switched")
        if words >= thresholds.new_words and here == 0.0 and best < thresholds.fresh:
            return Filing(None, best, "new-subject")
        return Filing(current, here, "session")
    if best_task is not None and best >= thresholds.join:
        return Filing(best_task, best, "matched")
    return Filing(None, best, "new")
