"""``memoryd eval``: the shipped search over a labelled board or a public retrieval corpus.

Board mode (``--board DIR --queries FILE``): queries ``{"id","query","task","brief"|null,"kind"}``;
a hit counts when the *task* of a result is the labelled task (what an agent sees first). Lines with
``"expect": "none"`` are negatives: they pass when nothing is returned.
Corpus mode (``--corpus FILE --queries FILE``): one record per corpus line, queries
``{"id","query","relevant":[ids],"category"}``; ``--scope prefix`` searches only the query's own group
(the id up to the first ``/``), the standard LoCoMo setting.

Metrics (binary relevance): top-1; MRR@10; recall@5 = |relevant ∩ top 5| / |relevant|;
nDCG@10 (Järvelin & Kekäläinen 2002, log2 discount) — as used by BEIR (Thakur et al. 2021).
Output with ``--json`` (contract §5): ``{"queries","top1","mrr","recall@5","ndcg@10","by_kind":{...}}``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from memoryd.logs import get_logger

log = get_logger("memoryd.eval")

#: Relative dates in board-v1 queries are asked on this day (shared/eval/README.md).
BOARD_AS_OF = datetime(2026, 11, 30, tzinfo=UTC)
METRICS = ("top1", "mrr", "recall@5", "ndcg@10")


def read_jsonl(path: Path) -> list[dict]:
    """Every JSON object line of ``path``; blank and broken lines are logged and skipped."""
    out: list[dict] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                log.warning("eval_line_skipped", path=str(path), line=n, reason="not JSON")
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def rank_metrics(ranked: Sequence[str], relevant: set[str]) -> dict[str, float]:
    """Metrics of one ranked id list against the relevant set."""
    if not relevant:
        return dict.fromkeys(METRICS, 0.0)
    top10 = list(ranked[:10])
    rr = next((1.0 / (i + 1) for i, r in enumerate(top10) if r in relevant), 0.0)
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(top10) if r in relevant)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return {
        "top1": 1.0 if ranked and ranked[0] in relevant else 0.0,
        "mrr": rr,
        "recall@5": len(set(ranked[:5]) & relevant) / len(relevant),
        "ndcg@10": dcg / idcg if idcg else 0.0,
    }


def _dedupe(seq: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in seq if not (x in seen or seen.add(x))]


def summarize(rows: list[tuple[str, dict[str, float]]], extra: dict | None = None) -> dict:
    """Average per-query metrics overall and by kind: ``[(kind, metrics)] -> report``."""
    scored = [(k, m) for k, m in rows if "top1" in m]
    report: dict = {"queries": len(scored)}
    for name in METRICS:
        report[name] = round(sum(m[name] for _, m in scored) / len(scored), 4) if scored else 0.0
    by_kind: dict[str, dict] = {}
    for kind in sorted({k for k, _ in rows}):
        ms = [m for k, m in rows if k == kind]
        entry: dict = {"n": len(ms)}
        for name in sorted({key for m in ms for key in m}):
            entry[name] = round(sum(m.get(name, 0.0) for m in ms) / len(ms), 4)
        by_kind[kind] = entry
    report["by_kind"] = by_kind
    if extra:
        report.update(extra)
    return report


def model_key(embedder) -> str:
    """What the eval's cached index is keyed by: the model's name, folder and ``model.onnx``'s mtime (ns),
    since every build of a model has the same name (``--model DIR`` with another graph of it); "none"."""
    if embedder is None:
        return "none"
    onnx = Path(embedder.model_dir) / "model.onnx"
    try:
        stamp = onnx.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return f"{embedder.name}|{Path(embedder.model_dir).resolve()}|{stamp}"


def _eval_index_dir(cache: Path, source: Path, model: str) -> Path:
    key = hashlib.sha256(f"{source.resolve()}|{model}".encode()).hexdigest()[:16]
    return cache / "eval" / key


def board_eval(board: Path, queries: Path, embedder, cache: Path, ranking=None) -> dict:
    """Index ``board`` (incrementally, in a cache folder of its own) and score ``queries``. Returns the
    report."""
    from memoryd.kinds.briefs.reader import BoardReader

    snap = BoardReader(board).load()
    store = _open_eval_index(cache, board, model_key(embedder))
    try:
        return _board_report(store, snap, queries, embedder, ranking)
    finally:
        store.close()


def _open_eval_index(cache: Path, source: Path, key: str):
    """The eval's own index of ``source`` (a board or a corpus file), under the index's writer lock."""
    from memoryd.index.lock import IndexLock
    from memoryd.index.store import IndexStore

    index = _eval_index_dir(cache, source, key)
    return IndexStore.open_writer(IndexLock(index, source.resolve(), command="memoryd eval"))


def _board_report(store, snap, queries: Path, embedder, ranking) -> dict:
    from memoryd.index.records import brief_record, sync_records
    from memoryd.index.search import search
    from memoryd.index.searcher import SearchQuery

    recs = [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()]
    sync_records(store, recs, embedder, kinds=("brief",))
    store.optimize()
    rows: list[tuple[str, dict[str, float]]] = []
    for q in read_jsonl(queries):
        res = search(
            store,
            embedder,
            SearchQuery(str(q.get("query", "")), limit=50, as_of=BOARD_AS_OF, ranking=ranking),
        )
        if q.get("expect") == "none":
            rows.append(("negative", {"none": 1.0 if not res.hits else 0.0}))
            continue
        tasks = _dedupe(h.task for h in res.hits)
        m = rank_metrics(tasks, {q["task"]})
        if q.get("brief"):
            m["brief_top1"] = 1.0 if res.hits and res.hits[0].id == q["brief"] else 0.0
        rows.append((str(q.get("kind", "all")), m))
    return summarize(rows, {"mode": "hybrid" if embedder else "keyword", "records": store.count()})


def corpus_eval(
    corpus: Path, queries: Path, scope: str, embedder, cache: Path, ranking=None, records: str = "memory"
) -> dict:
    """Index a corpus (one record per line) and score ``queries`` by their ``relevant`` ids.

    ``records="memory"`` (the default: LoCoMo as memories): every line becomes a memory
    (:func:`corpus_memories`) indexed as a ``memory`` record and searched as ``search_memories`` searches
    (kind ``memory``, :data:`memoryd.kinds.memories.ranking.MEMORY_RANKING`); ``records="corpus"``: the older
    ``corpus`` records of :func:`memoryd.index.records.corpus_record`, kept for comparison.
    """
    lines = [row for row in read_jsonl(corpus) if "id" in row]
    if records not in ("memory", "corpus"):
        raise ValueError(f"records must be 'memory' or 'corpus', not {records!r}")
    store = _open_eval_index(cache, corpus, f"{model_key(embedder)}|{records}")
    try:
        return _corpus_report(store, lines, queries, scope, embedder, ranking, records)
    finally:
        store.close()


def _corpus_report(
    store, lines: list[dict], queries: Path, scope: str, embedder, ranking, records: str
) -> dict:
    from memoryd.index.records import corpus_record, sync_records
    from memoryd.index.search import search
    from memoryd.index.searcher import SearchQuery

    if records == "memory":
        from memoryd.kinds.memories.ranking import MEMORY_RANKING

        built = corpus_memories(lines, scope)
        ids_of = {rec.id: ids for rec, ids in built}
        recs, kind, ranking = [rec for rec, _ in built], "memory", ranking or MEMORY_RANKING
    else:
        recs = [
            corpus_record(row, _scope_of(str(row["id"]), scope), *_neighbours(lines, n))
            for n, row in enumerate(lines)
        ]
        ids_of, kind = {rec.id: [rec.id] for rec in recs}, "corpus"
    sync_records(store, recs, embedder, kinds=(kind,))
    store.optimize()
    rows = []
    for q in read_jsonl(queries):
        wanted = SearchQuery(
            str(q.get("query", "")),
            kind=kind,
            limit=10,
            ranking=ranking,
            group_by_task=False,
            scope=_scope_of(str(q.get("id", "")), scope) or None,
        )
        res = search(store, embedder, wanted)
        ranked = _dedupe(i for h in res.hits for i in ids_of.get(h.id, ()))
        rows.append((str(q.get("category") or "all"), rank_metrics(ranked, set(q.get("relevant", [])))))
    extra = {"mode": "hybrid" if embedder else "keyword", "records": store.count(), "record_kind": kind}
    return summarize(rows, extra)


def _neighbours(rows: list[dict], n: int) -> tuple[dict | None, dict | None]:
    """The turns before and after ``rows[n]`` in the same ``session`` (None at a session's ends)."""
    session = rows[n].get("session")
    before = rows[n - 1] if session and n > 0 and rows[n - 1].get("session") == session else None
    after = rows[n + 1] if session and n + 1 < len(rows) and rows[n + 1].get("session") == session else None
    return before, after


def corpus_memories(rows: list[dict], scope: str) -> list[tuple]:
    """The memories of a corpus, as ``[(memory record, [corpus ids])]``, through the store path of a memory.

    Each line ``{"id","text","speaker"?,"at"?,"session"?}`` becomes :meth:`Memory.new
    <memoryd.kinds.memories.files.Memory.new>` with the turn as its content (``"<speaker>: <text> (<8 May
    2023>)"``: the human date a question names), ``created_at`` its ``at`` and ``project`` its scope, and
    its record is :func:`memoryd.kinds.memories.records.memory_record`'s. In a conversation the two
    neighbouring turns are added to that record (keyword terms at the lower ``text_aux`` weight, and the
    embedded text), exactly as :func:`memoryd.index.records.corpus_record` does: an answer is often split
    between a statement and its reply. Without them LoCoMo recall@5 drops from 0.656 to 0.573 (measured).
    Lines whose memories coincide (same normalised content) share one record, listing every id.
    """
    from dataclasses import replace

    from memoryd.importers.values import iso_utc
    from memoryd.index.records import clean, human_date, unplaced
    from memoryd.index.terms import term_string
    from memoryd.kinds.memories.files import Memory
    from memoryd.kinds.memories.records import memory_record

    def turn(row: dict) -> str:
        speaker, text = str(row.get("speaker") or ""), clean(str(row.get("text") or ""))
        return f"{speaker}: {text}" if speaker else text

    out: dict[str, tuple] = {}
    for n, row in enumerate(rows):
        at = str(row.get("at") or "")
        title = clean(str(row.get("title") or ""))
        body = " ".join(x for x in (title, turn(row)) if x)
        content = f"{body} ({human_date(at)})" if at else body
        if not content.strip():
            continue
        project = _scope_of(str(row["id"]), scope)
        memory = Memory.new(content, project=project, **({"created_at": iso_utc(at)} if iso_utc(at) else {}))
        if memory.id in out:
            out[memory.id][1].append(str(row["id"]))
            continue
        before, after = _neighbours(rows, n)
        context = [turn(r) for r in (before, after) if r]
        record = memory_record(memory)
        embed = "\n".join(
            [*(context[:1] if before else []), memory.content, *(context[-1:] if after else [])]
        )
        record = replace(
            record,
            text_aux=term_string("\n".join([project, *context])),
            embed_text=unplaced(embed),
        )
        out[memory.id] = (record, [str(row["id"])])
    return list(out.values())


def _scope_of(ident: str, scope: str) -> str:
    return ident.split("/", 1)[0] if scope == "prefix" and "/" in ident else ""


def format_table(report: dict) -> str:
    """A readable table: one row per kind, then the overall row."""
    cols = [
        c for c in ("n", *METRICS, "brief_top1", "none") if any(c in v for v in report["by_kind"].values())
    ]
    head = f"{'kind':<14}" + "".join(f"{c:>11}" for c in cols)
    lines = [head, "-" * len(head)]
    for kind, v in report["by_kind"].items():
        lines.append(
            f"{kind:<14}"
            + "".join(
                f"{v[c]:>11}" if c == "n" else (f"{v[c]:>11.3f}" if c in v else f"{'':>11}") for c in cols
            )
        )
    lines.append("-" * len(head))
    overall = {"n": report["queries"], **{m: report[m] for m in METRICS}}
    lines.append(
        f"{'overall':<14}"
        + "".join(
            f"{overall[c]:>11}" if c == "n" else (f"{overall[c]:>11.3f}" if c in overall else f"{'':>11}")
            for c in cols
        )
    )
    lines.append(f"mode: {report.get('mode')}, records: {report.get('records')}")
    for key in ("board", "corpus"):
        if report.get(key):
            lines.append(f"{key}: {report[key]}, queries: {report.get('queries_file')}")
    return "\n".join(lines)
