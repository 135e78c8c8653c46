"""``memoryd eval --small DIR``: the shipped search on stores of 1, 3, 10 and 50 records cut from the labelled data.

A new user's store is small; ranking must behave there as it does on thousands of records: a related record
is returned (ideally first), an unrelated one is not. ``DIR`` is the shared eval folder (``board-v1/``,
``locomo/``; ``shared/eval/README.md``). Three sets of records:

* ``briefs``: board-v1 briefs as brief records, searched as ``search_briefs`` searches;
* ``memories``: the same briefs' texts (task title, title, summary, what was said) stored as memories, searched
  as ``search_memories`` searches (kind ``memory``, the memories' ranking);
* ``locomo``: LoCoMo turns as memories with their neighbouring turns (:func:`memoryd.cli.eval.labelled.corpus_memories`),
  one conversation per slice.

A slice of ``size`` records is one anchor query's labelled record plus ``size - 1`` others of the same set
(the same conversation for LoCoMo) drawn by ``random.Random(f"{set}/{size}/{seed}")``: deterministic. Every
query is then asked of every slice and counted as

* **related**: its labelled brief (task, when no brief is labelled) or one of its labelled turns is in the slice:
  ``hit`` = returned at all, ``first`` = returned first;
* **unrelated**: nothing it is labelled with is in the slice (nor, for LoCoMo, a neighbouring turn): reported
  as the share that returned anything. Records of the same board or conversation are often near the topic
  (the same project, the same two speakers), so this share is not expected to be zero;
* **foreign**: questions of the other data set (LoCoMo questions for board slices, board queries for
  LoCoMo slices) and the 20 board negatives: nothing in the slice answers them; ``returned`` should be ~0.

The memories set leaves out the identifier and status queries: their answers live in screen text and task
status, which the memory texts do not carry. Vectors are embedded once per record text and per query and
reused across slices; each slice is a fresh index in a temporary folder.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from memoryd.cli.eval.labelled import BOARD_AS_OF, read_jsonl

SIZES = (1, 3, 10, 50)
SETS = ("briefs", "memories", "locomo")
FOREIGN_SAMPLE = 60
#: Query kinds the memory texts cannot answer (screen text, task status).
MEMORY_SKIPS = frozenset({"identifier", "status"})


@dataclass
class Universe:
    """The records of one set; ``label[i]`` is what a query names (task id or corpus ids) for record ``i``."""

    name: str
    records: list
    label: list[frozenset[str]]
    group: list[str]  # slices draw from one group (a LoCoMo conversation; one group for the board)
    kind: str | None
    ranking: object | None
    queries: list[dict]  # {"query", "labels", "near", "answers": sets of labels; "kind", "group"}
    foreign: list[dict] = field(default_factory=list)


def _board_universes(root: Path, sets: Iterable[str]) -> list[Universe]:
    from memoryd.index.records import brief_record
    from memoryd.kinds.briefs.reader import BoardReader
    from memoryd.kinds.memories.files import Memory
    from memoryd.kinds.memories.ranking import MEMORY_RANKING
    from memoryd.kinds.memories.records import memory_record

    snap = BoardReader(root / "board-v1" / "board").load()
    briefs = sorted(snap.briefs.values(), key=lambda b: b.id)
    recs = [brief_record(b, snap.tasks.get(b.task)) for b in briefs]
    dev = read_jsonl(root / "board-v1" / "dev.jsonl")
    out = []
    for name in sets:
        if name == "briefs":
            records, kind, ranking, qs = recs, None, None, dev
        elif name == "memories":
            records = [
                replace(memory_record(Memory.new(r.embed_text, project=r.project)), id=r.id) for r in recs
            ]
            kind, ranking = "memory", MEMORY_RANKING
            qs = [q for q in dev if q.get("kind") not in MEMORY_SKIPS]
        else:
            continue
        # a query names its brief when it has one (another brief of the same task is neither related nor
        # unrelated: it is skipped), else its task
        queries = [
            {
                "query": q["query"],
                "labels": {q["brief"]} if q.get("brief") else {q["task"]},
                "near": {q["task"]},
                "answers": {q["task"]},  # any brief of the labelled task answers (the board metric)
                "kind": q.get("kind", ""),
                "group": "",
            }
            for q in qs
        ]
        label = [frozenset({r.id, r.task}) for r in recs]  # a memory keeps its brief's id; its task is ""
        out.append(Universe(name, records, label, [""] * len(records), kind, ranking, queries))
    return out


def _locomo_universe(root: Path) -> Universe:
    from memoryd.cli.eval.labelled import _neighbours, corpus_memories
    from memoryd.kinds.memories.ranking import MEMORY_RANKING

    lines = [row for row in read_jsonl(root / "locomo" / "corpus.jsonl") if "id" in row]
    built = corpus_memories(lines, "prefix")
    near_of: dict[str, set[str]] = {}
    for n, row in enumerate(lines):
        ids = {str(row["id"])} | {str(r["id"]) for r in _neighbours(lines, n) if r}
        near_of[str(row["id"])] = ids
    queries = []
    for q in read_jsonl(root / "locomo" / "queries.jsonl"):
        rel = {str(i) for i in q.get("relevant", [])} & near_of.keys()
        if rel:
            near = set().union(*(near_of.get(i, {i}) for i in rel))
            group = str(q["id"]).split("/", 1)[0]
            queries.append(
                {"query": q["query"], "labels": rel, "near": near, "answers": rel, "kind": "", "group": group}
            )
    records = [rec for rec, _ in built]
    return Universe(
        "locomo",
        records,
        [frozenset(ids) for _, ids in built],
        [rec.project for rec in records],
        "memory",
        MEMORY_RANKING,
        queries,
    )


class _Vectors:
    """Passage vectors by embedded text: each text is embedded once across all slices."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.cache: dict[str, object] = {}

    def of(self, records: Sequence):
        import numpy as np

        todo = sorted({r.embed_text for r in records if r.embed_text not in self.cache})
        if todo:
            for text, vec in zip(todo, self.embedder.embed_passages(todo), strict=True):
                self.cache[text] = vec
        return np.stack([self.cache[r.embed_text] for r in records])


class _Queries:
    """``embedder`` with each query embedded once across all slices: a search embeds its query alone (one
    run), so the vector asked again is the one computed the first time. Every other attribute is the
    embedder's."""

    def __init__(self, embedder) -> None:
        self._embedder = embedder
        self._cache: dict[str, object] = {}

    def __getattr__(self, name: str):
        return getattr(self._embedder, name)

    def embed_queries(self, texts: Sequence[str]):
        import numpy as np

        for text in texts:
            if text not in self._cache:
                self._cache[text] = self._embedder.embed_queries([text])[0]
        return np.stack([self._cache[t] for t in texts])


def _slice(u: Universe, size: int, seed: int) -> list[int]:
    rng = random.Random(f"{u.name}/{size}/{seed}")
    anchor = rng.choice(u.queries)
    pool = [i for i, g in enumerate(u.group) if g == anchor["group"]]
    first = rng.choice([i for i in pool if u.label[i] & anchor["labels"]])
    rest = [i for i in pool if i != first]
    return [first, *rng.sample(rest, min(size - 1, len(rest)))]


def _classify(q: dict, held: set[str]) -> str | None:
    if q["labels"] & held:
        return "related"
    if q["near"] & held:
        return None  # a neighbour or a sibling brief: neither related nor unrelated
    return "unrelated"


def _count_slice(
    u: Universe, store, embedder, label: dict, group: str, others: list[str], counts: dict
) -> None:
    """Ask every query of ``group`` and every foreign query of one slice's ``store``; add to ``counts``."""
    from memoryd.index.search import search
    from memoryd.index.searcher import SearchQuery

    as_of = None if u.name == "locomo" else BOARD_AS_OF
    held = set().union(*label.values())

    def ask(text: str) -> list:
        return search(
            store, embedder, SearchQuery(text, kind=u.kind, ranking=u.ranking, limit=10, as_of=as_of)
        ).hits

    for q in u.queries:
        what = _classify(q, held) if q["group"] == group else None
        if what is None:
            continue
        hits = ask(q["query"])
        counts[what] += 1
        if what == "unrelated":
            counts["unrelated_returned"] += bool(hits)
            continue
        found = [bool(label[h.id] & q["answers"]) for h in hits]
        counts["hit"] += any(found)
        counts["first"] += bool(found) and found[0]
    for text in others:
        counts["foreign"] += 1
        counts["foreign_returned"] += bool(ask(text))


def small_store_eval(
    root: Path,
    embedder,
    *,
    sizes: Sequence[int] = SIZES,
    seeds: int = 8,
    sets: Iterable[str] = SETS,
    foreign: int = FOREIGN_SAMPLE,
) -> dict:
    """Score the search on small slices of the labelled data (module docstring). ``root`` is the shared eval
    folder; ``embedder`` the model (None: keyword-only). Returns ``{"sizes", "seeds", "sets": {set: {size:
    counts}}}`` where counts are ``related``, ``hit``, ``first``, ``unrelated``, ``unrelated_returned``,
    ``foreign``, ``foreign_returned`` (numbers of queries; rates are ``hit / related`` and so on)."""
    from memoryd.index.store import IndexStore

    sets = list(sets)
    board_sets = [s for s in sets if s in ("briefs", "memories")]
    universes = _board_universes(root, board_sets) if board_sets else []
    if "locomo" in sets:
        universes.append(_locomo_universe(root))
    negatives = [q["query"] for q in read_jsonl(root / "board-v1" / "negatives.jsonl")]
    rng = random.Random("foreign")
    locomo_questions = [q["query"] for q in read_jsonl(root / "locomo" / "queries.jsonl")]
    board_queries = [q["query"] for q in read_jsonl(root / "board-v1" / "dev.jsonl")]
    foreign_of = {
        "board": rng.sample(locomo_questions, min(foreign, len(locomo_questions))) + negatives,
        "locomo": rng.sample(board_queries, min(foreign, len(board_queries))) + negatives,
    }
    vectors = _Vectors(embedder) if embedder is not None else None
    embedder = _Queries(embedder) if embedder is not None else None
    report: dict = {"sizes": list(sizes), "seeds": seeds, "sets": {}}
    with tempfile.TemporaryDirectory(prefix="memoryd-small-") as tmp:
        for u in universes:
            per_size = report["sets"].setdefault(u.name, {})
            others = foreign_of["locomo" if u.name == "locomo" else "board"]
            for size in sizes:
                counts = dict.fromkeys(
                    (
                        "related",
                        "hit",
                        "first",
                        "unrelated",
                        "unrelated_returned",
                        "foreign",
                        "foreign_returned",
                    ),
                    0,
                )
                for seed in range(seeds):
                    idx = _slice(u, size, seed)
                    recs = [u.records[i] for i in idx]
                    store = IndexStore(Path(tmp) / f"{u.name}-{size}-{seed}")
                    store.upsert(
                        recs, vectors.of(recs) if vectors else None, embedder.name if embedder else ""
                    )
                    store.optimize()
                    label = {r.id: u.label[i] for r, i in zip(recs, idx, strict=True)}
                    _count_slice(u, store, embedder, label, u.group[idx[0]], others, counts)
                per_size[size] = counts
    return report


def format_small(report: dict) -> str:
    """One row per set and size: counts and rates."""
    head = f"{'set':<10}{'size':>5}{'related':>9}{'hit':>7}{'first':>7}{'unrelated':>11}{'returned':>9}"
    head += f"{'foreign':>9}{'returned':>9}"
    lines = [head, "-" * len(head)]
    for name, per_size in report["sets"].items():
        for size, c in per_size.items():

            def rate(a: str, b: str, c=c) -> str:
                return f"{c[a] / c[b]:.3f}" if c[b] else "-"

            lines.append(
                f"{name:<10}{size:>5}{c['related']:>9}{rate('hit', 'related'):>7}{rate('first', 'related'):>7}"
                f"{c['unrelated']:>11}{rate('unrelated_returned', 'unrelated'):>9}"
                f"{c['foreign']:>9}{rate('foreign_returned', 'foreign'):>9}"
            )
    lines.append(f"seeds: {report['seeds']} per size; slices drawn by random.Random('<set>/<size>/<seed>')")
    return "\n".join(lines)
