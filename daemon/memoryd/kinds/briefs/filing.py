"""Which task a captured prompt belongs to: the open task it continues, or a new one.

A prompt that names an open task of the project, by its id (``t-…``) or the id of one of its briefs
(``b-…``), goes to that task whatever the session or the scores say (:func:`named_task`: the first such
id in the text). Otherwise the caller searches the prompt among the briefs of the project's **open**
tasks with the hybrid search (the same one ``search_briefs`` uses) and hands the best score of each task
here; :func:`choose_task` decides, with no I/O:

* in an agent session that already filed a prompt into an open task of this project (``current``), the
  prompt stays there unless the developer clearly changed subject: another open task matches at least
  :attr:`Thresholds.switch` and beats the current task by :attr:`Thresholds.margin`, or the prompt is a
  self-contained request (at least :attr:`Thresholds.new_words` words) that matches neither the current
  task nor any other (best score below :attr:`Thresholds.fresh`), which starts a new task;
* otherwise it joins the best-matching open task when that match is clear (at least
  :attr:`Thresholds.join`, and ahead of the second-best task by :attr:`Thresholds.gap`), else starts a
  new task.

A wrong join costs more than a wrong new task: a new task costs the developer nothing, a wrong one
pollutes a task's history and the digest, and the agent is told it continues earlier work. The default
thresholds are tuned for that cost on a labelled set (``memoryd eval --filing``, README "Filing captured
prompts into tasks"). Scores of the two search modes are not on one scale, hence two profiles.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memoryd.board.gate import BRIEF_ID_PATTERN, TASK_ID_PATTERN

_NAMED = re.compile(rf"(?<![0-9A-Za-z_-])({TASK_ID_PATTERN}|{BRIEF_ID_PATTERN})(?![0-9A-Za-z_-])", re.ASCII)


@dataclass(frozen=True)
class Thresholds:
    """Scores are the search's 0–1 scores; ``new_words`` counts whitespace-separated words."""

    join: float
    switch: float
    margin: float
    fresh: float
    new_words: int
    gap: float = 0.0


#: Tuned (see the module docstring); "hybrid" = model warm, "keyword" = not.
DEFAULTS: dict[str, Thresholds] = {
    "hybrid": Thresholds(join=0.45, switch=0.65, margin=0.4, fresh=0.5, new_words=24, gap=0.0),
    "keyword": Thresholds(join=0.45, switch=0.65, margin=0.4, fresh=0.6, new_words=16, gap=0.3),
}


@dataclass(frozen=True)
class Filing:
    """The decision: ``task`` to join (None = start a new task), the ``score`` behind it and why."""

    task: str | None
    score: float
    reason: str  # "named" | "session" | "switched" | "matched" | "new" | "new-subject"


def named_task(text: str, open_tasks: set[str], task_of_brief: Callable[[str], str | None]) -> str | None:
    """The first task of ``open_tasks`` that ``text`` names, by its id or a brief's (``task_of_brief``:
    brief id -> its task id, or None); None when it names none of them (other ids are ignored)."""
    for found in _NAMED.findall(text):
        task = found if found.startswith("t-") else task_of_brief(found)
        if task in open_tasks:
            return task
    return None


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
    ranked = sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    best_task, best = ranked[0] if ranked else (None, 0.0)
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
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    if best_task is not None and best >= thresholds.join and best - second >= thresholds.gap:
        return Filing(best_task, best, "matched")
    return Filing(None, best, "new")
