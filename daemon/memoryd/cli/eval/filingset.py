"""The labelled filing set: prompt sequences, each prompt labelled with the task it belongs to.

Built in memory from the shared eval folder (``DIR`` = ``shared/eval``, read in place, never copied):

* **board-v1** (``board-v1/board``): every brief's ``said.txt`` (what the developer said: English, Hinglish,
  Japanese) is one prompt, in the order of ``created_at``, labelled with its brief's task. Agent sessions are
  laid over that order per project by ``random.Random("filing/<project>")`` (deterministic), giving the case
  of each prompt:

  - ``new``: the first prompt of a task, in a fresh agent session (no task yet: a new one must start);
  - ``new-subject``: the first prompt of a task, sent in a session that worked on another open task;
  - ``same-session``: a later prompt of a task, in the session that sent its previous prompt;
  - ``resume``: a later prompt of a task, from a fresh session (the task is open on the board);
  - ``switch``: a later prompt of a task, sent in a session that last worked on another open task.

  A task marked ``done`` on the board is closed right after its last prompt. After a project's own
  prompts come :data:`UNRELATED` prompts about other work, which must start a new task: the first prompt
  of a done task of another project (its project's name swapped for this one's), drawn by
  ``random.Random("unrelated/<project>")``, leaving out the few pairs whose subject is close to an open
  task of this project (:data:`CLOSE_SUBJECTS`). They alternate between

  - ``unrelated``: from a fresh agent session;
  - ``unrelated (in session)``: sent in a session whose task is still open;

  each is written into a task of its own that is closed at once, so it never competes with the next.
* **LoCoMo** (``locomo/corpus.jsonl``): each conversation is a project and each of its dated sessions one
  task, sent by one agent session: its first :data:`LOCOMO_TURNS` turns that are briefs (at least
  :data:`LOCOMO_MIN_WORDS` words) are consecutive prompts. The first only opens the task (not scored: whether a
  new chat continues the last one is not labelled); the others are ``same-session (chat)`` cases, where the
  subject drifts as talk does, with little word overlap. A session's task is closed when the session after
  the next one starts, so one earlier task competes.

Splits (so thresholds are tuned on one part and reported on the other): :data:`TUNE_GROUPS` (three projects,
two conversations) is the tuning split, the rest is held out.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memoryd.cli.eval.labelled import read_jsonl
from memoryd.kinds.briefs.capture import clean_prompt

CASES = (
    "new",
    "new-subject",
    "same-session",
    "resume",
    "switch",
    "unrelated",
    "unrelated (in session)",
    "same-session (chat)",
)
TUNE_GROUPS = frozenset({"shopfront", "infra", "pipeline", "locomo-conv-26", "locomo-conv-41"})
LOCOMO_TURNS = 3
LOCOMO_MIN_WORDS = 4
#: Odds of each case for a board-v1 prompt (the rest: ``new``, ``resume``).
P_NEW_SUBJECT = 0.5
P_SAME = 0.4
P_SWITCH = 0.25
#: Unrelated prompts appended to each board-v1 project.
UNRELATED = 10
#: (task of another project, project): the task's subject is close to an open task of that project (the
#: same words for related work), so "new task" would be a debatable label: left out.
CLOSE_SUBJECTS = frozenset(
    {
        ("t-20261118-98b3b5", "docs-site"),  # Japanese onboarding copy / Japanese version of the docs
        ("t-20260814-eed858", "mobile"),  # code blocks in dark mode / dark mode for the app
        ("t-20260915-569206", "infra"),  # slow web CI / autoscale CI runners
        ("t-20261111-585a5a", "infra"),  # mask personal data / masked staging snapshot
        ("t-20260922-1ba58e", "infra"),  # Postgres exhaustion under load / scale payments-api
    }
)


@dataclass
class Step:
    """One prompt. ``gold``: its task's label (a board-v1 task id, or ``<conversation>/<session>``);
    ``case``: one of :data:`CASES`, or None when the step only sets the scene (not scored);
    ``close``: gold tasks to mark done after this step."""

    group: str
    split: str  # "tune" | "held"
    session: str
    project: str
    prompt: str
    gold: str
    case: str | None
    close: list[str] = field(default_factory=list)


def build_set(root: Path) -> list[Step]:
    """Every step of the set, in the order they are filed. Raises OSError when a source file is missing."""
    return [*_board_steps(root / "board-v1" / "board"), *_locomo_steps(root / "locomo" / "corpus.jsonl")]


def _split(group: str) -> str:
    return "tune" if group in TUNE_GROUPS else "held"


def _board_steps(board: Path) -> list[Step]:
    tasks = {}
    for path in sorted((board / "tasks").glob("*.json")):
        data = json.loads(path.read_text("utf-8"))
        tasks[data["id"]] = data
    briefs = []
    for path in sorted((board / "briefs").glob("*/brief.json")):
        meta = json.loads(path.read_text("utf-8"))
        said = (path.parent / "said.txt").read_text("utf-8")
        text = clean_prompt(said)
        if text.is_brief:
            briefs.append((meta["created_at"], meta["id"], meta["task"], meta["project"], text.text))
    briefs.sort()
    last_of = {}
    for _, bid, task, _, _ in briefs:
        last_of[task] = bid
    by_project: dict[str, list] = defaultdict(list)
    for row in briefs:
        by_project[row[3]].append(row)
    openers: dict[str, tuple[str, str]] = {}  # done task -> (its project, its first prompt)
    for _, _, task, project, text in briefs:
        if tasks.get(task, {}).get("status") == "done":
            openers.setdefault(task, (project, text))
    steps: list[Step] = []
    for project in sorted(by_project):
        steps.extend(_project_steps(project, by_project[project], tasks, last_of, openers))
    return steps


def _project_steps(project: str, rows: list, tasks: dict, last_of: dict, openers: dict) -> list[Step]:
    rng = random.Random(f"filing/{project}")
    on: dict[str, str] = {}  # agent session -> the task it sent its last prompt for (insertion = recency)
    closed: set[str] = set()
    seen: set[str] = set()
    steps = []
    for _, bid, task, _, text in rows:
        others = [s for s, t in on.items() if t != task and t not in closed]
        mine = [s for s, t in on.items() if t == task]
        r = rng.random()
        if task not in seen:
            case = "new-subject" if others and r < P_NEW_SUBJECT else "new"
            session = others[-1] if case == "new-subject" else f"{project}/s{len(on) + 1}"
        elif mine and r < P_SAME:
            case, session = "same-session", mine[-1]
        elif others and r < P_SAME + P_SWITCH:
            case, session = "switch", others[-1]
        else:
            case, session = "resume", f"{project}/s{len(on) + 1}"
        seen.add(task)
        on.pop(session, None)
        on[session] = task
        done = last_of[task] == bid and tasks.get(task, {}).get("status") == "done"
        if done:
            closed.add(task)
        steps.append(
            Step(project, _split(project), session, project, text, task, case, [task] if done else [])
        )
    return steps + _unrelated_steps(project, openers, on, closed)


def _unrelated_steps(project: str, openers: dict, on: dict, closed: set) -> list[Step]:
    rng = random.Random(f"unrelated/{project}")
    pool = sorted(
        (task, source, text)
        for task, (source, text) in openers.items()
        if source != project and (task, project) not in CLOSE_SUBJECTS
    )
    steps = []
    for k, (task, source, text) in enumerate(rng.sample(pool, min(UNRELATED, len(pool)))):
        text = re.sub(rf"\b{re.escape(source)}\b", project, text)
        busy = [s for s, t in on.items() if t not in closed]
        if k % 2 and busy:
            case, session = "unrelated (in session)", busy[-1]
        else:
            case, session = "unrelated", f"{project}/s{len(on) + 1}"
        gold = f"unrelated/{project}/{task}"
        on.pop(session, None)
        on[session] = gold
        closed.add(gold)
        steps.append(Step(project, _split(project), session, project, text, gold, case, [gold]))
    return steps


def _locomo_steps(corpus: Path) -> list[Step]:
    sessions: dict[str, list[str]] = defaultdict(list)  # "conv-26/S1" -> prompts, in corpus order
    for row in read_jsonl(corpus):
        sid, text = str(row.get("session") or ""), clean_prompt(str(row.get("text") or ""))
        long_enough = text.is_brief and len(text.text.split()) >= LOCOMO_MIN_WORDS
        if "/" in sid and long_enough and len(sessions[sid]) < LOCOMO_TURNS:
            sessions[sid].append(text.text)
    steps: list[Step] = []
    by_conv: dict[str, list[str]] = defaultdict(list)
    for sid in sessions:
        by_conv[sid.split("/", 1)[0]].append(sid)
    for conv in sorted(by_conv):
        group = f"locomo-{conv}"
        order = sorted(by_conv[conv], key=lambda s: int(s.rsplit("S", 1)[1]))
        for n, sid in enumerate(order):
            prompts = sessions[sid]
            for k, text in enumerate(prompts):
                close = [order[n - 2]] if k == 0 and n >= 2 else []
                case = None if k == 0 else "same-session (chat)"
                steps.append(Step(group, _split(group), sid, group, text, sid, case))
                if close:  # closed once the new chat has opened: its opener does not compete with it
                    steps[-1].close = close
    return steps


def describe(steps: list[Step]) -> dict:
    """``{"prompts", "scored", "by_case": {case: n}, "by_split": {split: n}}`` (scored prompts only)."""
    scored = [s for s in steps if s.case]
    by_case: dict[str, int] = defaultdict(int)
    by_split: dict[str, int] = defaultdict(int)
    for s in scored:
        by_case[s.case] += 1
        by_split[s.split] += 1
    return {
        "prompts": len(steps),
        "scored": len(scored),
        "by_case": dict(by_case),
        "by_split": dict(by_split),
    }


def dump(steps: list[Step], path: Path) -> None:
    """Write the set as JSON lines (one :class:`Step` each), for reading it; not needed to run it."""
    with open(path, "w", encoding="utf-8") as fh:
        for s in steps:
            fh.write(json.dumps(asdict(s), ensure_ascii=False) + "\n")
