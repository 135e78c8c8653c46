"""Records: the rows of the index, derived from board files (the truth) and rebuildable at any time; what a
record source hands the writer (:class:`SourceBatch`); and reconciling them with the index.

One record per brief; memories, interactions and summaries are records of other kinds in the same table.
Every text is redacted *before* it becomes a record, so neither the keyword index nor the vectors ever
see a secret: a brief's texts were redacted as a whole by :class:`memoryd.kinds.briefs.reader.BoardReader` as
it read them (before ``outcome.md`` became bullets), so :func:`brief_record` does not redact again; the
fields of the other kinds pass :func:`clean`.

The board is the truth; :func:`sync_records` makes the index match a full set of desired records of
some kinds: add, update, delete, re-embedding only what changed. A record whose content hash is unchanged
is not rewritten; one whose embedding text is unchanged keeps its stored vector (nothing is re-embedded
after a restart, or after an edit that only touched the outcome or the screens).

*Origins.* A source (:mod:`memoryd.core.sources`) hands the writer a :class:`SourceBatch`. Every record
comes from one **origin**: a key naming what it was derived from, normally the board-relative POSIX path
of one file or folder (``memories/<hash>.md``, ``briefs/<id>``). One origin may yield many records (a
session file yields one record per line). :attr:`SourceBatch.origins` maps every origin the batch covers
to the ids of ALL the records it yields now; ``()`` means the origin yields nothing any more (file
deleted, broken, emptied). The writer remembers origin -> record ids (rebuilt at every full sync) and
deletes each record an origin no longer yields, so deleting or editing a file removes every record
derived from it that is gone, without the source having to remember anything.

*Deferred records.* A full load may offer a record as its id, a hash of the inputs it is derived from
and a function deriving it (:meth:`SourceBatch.defer`): the writer derives it only when those inputs
changed since it last derived that record (:mod:`memoryd.index.derive_cache`).

*Skips.* Files that cannot be read go to :attr:`SourceBatch.skipped` (and the log); their origin maps to
``()`` so any record they yielded before is removed. A skipped path is the origin or a path inside it
(``briefs/<id>/notes.md``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Protocol

from memoryd.index.owned import main_terms
from memoryd.index.redact import PLACEHOLDERS, redact
from memoryd.index.terms import term_string
from memoryd.logs import get_logger

if TYPE_CHECKING:  # the store imports Record from here
    import numpy as np

    from memoryd.board.gate import Skipped
    from memoryd.index.store import IndexStore

log = get_logger("memoryd.index.records")

#: Bump when the way records are derived changes: every record is then re-derived (not re-embedded
#: unless its embedding text changed).
#: 2: a brief's main terms keep its task's title apart (:mod:`memoryd.index.owned`); emoji are terms.
RECORD_FORMAT = 2
LINE_CHARS = 200
#: Records per write: each LanceDB write adds a fragment and a version, so writes are batched.
BATCH = 256


@dataclass(frozen=True)
class Record:
    """One index row before embedding.

    ``text_main`` / ``text_aux`` are keyword term strings (:func:`memoryd.index.terms.term_string`):
    main = what the person said, titles, summary (weighted higher); aux = prompt, outcome, notes and
    screen text (searchable, never handed out). ``embed_text`` is what the meaning half embeds.
    """

    id: str
    kind: str
    project: str
    task: str
    status: str
    created_at: str
    title: str
    line: str
    text_main: str
    text_aux: str
    embed_text: str

    # derived once per record: a write asks for each several times (the derive cache, the change check,
    # the row), and a record is never changed after it is made
    @functools.cached_property
    def lang(self) -> str:
        """Script group of the embedded text: ``"cjk"`` or ``"latin"`` (see :func:`script_group`)."""
        return script_group(self.embed_text)

    @functools.cached_property
    def content_hash(self) -> str:
        """SHA-256 over every derived field: equal hash = nothing to rewrite."""
        values = {name: getattr(self, name) for name in _FIELDS}  # asdict deep-copies each str: ~3x slower
        blob = json.dumps([RECORD_FORMAT, values, self.lang], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    @functools.cached_property
    def embed_hash(self) -> str:
        """SHA-256 of the embedding text alone: equal hash = the stored vector is still right."""
        return hashlib.sha256(self.embed_text.encode()).hexdigest()


_FIELDS = tuple(f.name for f in fields(Record))

_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def script_group(text: str) -> str:
    """``"cjk"`` when the text has ten or more CJK characters (or they are a fifth of its letters),
    else ``"latin"``.

    Multilingual embedders score a query higher against any text in its own script; search
    normalises cosines within each group so a Japanese question can still find an English record.
    """
    cjk = len(_CJK_CHAR.findall(text))
    if cjk == 0:  # the usual case, answered without a loop over the characters
        return "latin"
    if cjk >= 10:
        return "cjk" if any(ch.isalpha() for ch in text) else "latin"
    letters = sum(1 for ch in text if ch.isalpha())
    return "cjk" if letters and cjk * 5 >= letters else "latin"


def clean(text: str) -> str:
    """Redact secrets; the only way text enters a record."""
    return redact(text).text


def unplaced(text: str) -> str:
    """Drop redaction placeholders from text that is embedded: a vector must not encode that a
    secret of some kind was there."""
    return PLACEHOLDERS.sub(" ", text)


def first_line(text: str, limit: int = LINE_CHARS) -> str:
    """The first non-blank line of ``text``, whitespace-collapsed, cut to ``limit`` characters (``text``
    itself when that is all of it: the index's columns then share the string with the record's source)."""
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if line:
            if len(line) > limit:
                return line[: limit - 1].rstrip() + "…"
            return text if line == text else line
    return ""


def brief_record(brief, task) -> Record:
    """Derive the record of a brief (``memoryd.kinds.briefs.files.Brief``) and its task (``Task`` or None), both
    as :class:`memoryd.kinds.briefs.reader.BoardReader` returns them: already redacted."""
    task_title = task.title if task else ""
    status = task.status if task else "open"
    title, summary, said = brief.title, brief.summary, brief.said
    outcome_text = ""
    if brief.outcome is not None:
        o = brief.outcome
        outcome_text = "\n".join([*o.did, *o.decided, *o.open, *o.files, *o.retired])
    aux = "\n".join(
        [brief.prompt, outcome_text, "\n".join(brief.notes)]
        + [f"{s.text}\n{s.window_title or ''} {s.app or ''}" for s in brief.screens]
    )
    main = main_terms(term_string("\n".join([title, summary, said, brief.project])), term_string(task_title))
    embed = unplaced("\n".join(x for x in (task_title, title, summary, said) if x))
    return Record(
        id=brief.id,
        kind="brief",
        project=brief.project,
        task=brief.task,
        status=status,
        created_at=brief.created_at,
        title=title,
        line=first_line(said) or first_line(summary) or title,
        text_main=main,
        text_aux=term_string(aux),
        embed_text=embed,
    )


def _turn(row: dict) -> str:
    speaker = str(row.get("speaker") or "")
    text = clean(str(row.get("text") or ""))
    return f"{speaker}: {text}" if speaker else text


def corpus_record(row: dict, scope: str, before: dict | None = None, after: dict | None = None) -> Record:
    """A record for one line of a public retrieval corpus (``{"id","text",...}``), used by ``eval``.

    ``scope`` goes into ``project`` so ``--scope prefix`` is an ordinary project filter. In a
    conversation (rows with a ``session``), ``before``/``after`` are the neighbouring turns: an answer
    is often split between a statement and its reply, so the neighbours are embedded with the turn
    and searchable at the lower weight of ``text_aux``.
    """
    text = clean(str(row.get("text") or ""))
    title = clean(str(row.get("title") or ""))
    at = str(row.get("at") or "")
    body = " ".join(x for x in (title, _turn(row)) if x)
    dated = f"{body} ({human_date(at)})" if at else body
    context = [_turn(r) for r in (before, after) if r]
    embed = "\n".join([*(context[:1] if before else []), dated, *(context[-1:] if after else [])])
    return Record(
        id=str(row["id"]),
        kind="corpus",
        project=scope,
        task=str(row.get("session") or ""),
        status="",
        created_at=at,
        title=title,
        line=first_line(text),
        text_main=term_string(dated),
        text_aux=term_string("\n".join(context)),
        embed_text=unplaced(embed),
    )


def human_date(iso: str) -> str:
    """``2023-05-08T13:56:00`` -> ``8 May 2023`` (dates a question would name); input echoed if unparsable."""
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    return f"{dt.day} {dt.strftime('%B %Y')}"


# -- what a source hands the writer ------------------------------------------------------------------


@dataclass(frozen=True)
class Deferred:
    """A record offered without deriving it: its ``id``, the hash of its ``inputs``, and ``derive()``."""

    id: str
    inputs: str
    derive: Callable[[], Record]


@dataclass
class SourceBatch:
    """What a source yields for a full load or for some changed paths.

    ``records``: records to upsert (unchanged ones are skipped by the indexer by content hash).
    ``deferred``: records to upsert, derived only when their inputs changed (:class:`Deferred`).
    ``origins``: origin key -> ids of every record that origin yields now (``()`` = none any more).
    ``skipped``: files not loaded, and why. ``complete``: ``origins`` covers the whole folder.
    """

    records: list[Record] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)
    origins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    complete: bool = False

    def add(self, origin: str, records: Collection[Record]) -> None:
        """Record that ``origin`` yields exactly ``records`` now (appends to :attr:`records`)."""
        self.records.extend(records)
        self.origins[origin] = tuple(r.id for r in records)

    def defer(self, origin: str, record_id: str, inputs: str, derive: Callable[[], Record]) -> None:
        """Record that ``origin`` yields exactly the one record ``derive()`` returns, whose id is
        ``record_id`` and whose inputs hash to ``inputs`` (appends to :attr:`deferred`)."""
        self.deferred.append(Deferred(record_id, inputs, derive))
        self.origins[origin] = (record_id,)


class FullLoad(Protocol):
    """What :func:`records_by_id` needs of a source (a :class:`memoryd.core.sources.RecordSource`)."""

    def load_all(self) -> SourceBatch: ...


def records_by_id(
    source: FullLoad,
    paths: Collection[str],
    folder: str,
    id_of: Callable[[str], str | None],
    load: Callable[[str, SourceBatch], None],
) -> SourceBatch:
    """``records_for`` of a source whose files are named by id: ``load(id, batch)`` for each id (sorted)
    ``id_of(path)`` finds among the board-relative ``paths`` under ``folder`` (paths it gives None for are
    not records of it); ``source.load_all()`` when ``folder`` itself is among them (created, deleted or
    moved wholesale: only a full load can tell what it covers)."""
    ids: set[str] = set()
    for path in paths:
        if path == folder:
            return source.load_all()
        if path.startswith(folder + "/") and (found := id_of(path)) is not None:
            ids.add(found)
    batch = SourceBatch()
    for one in sorted(ids):
        load(one, batch)
    return batch


# -- reconciling records with the index --------------------------------------------------------------


@dataclass
class SyncReport:
    """Counts of one reconciliation."""

    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    embedded: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)

    def counts(self) -> dict[str, int]:
        """``{"added", "updated", "deleted", "unchanged"}``: what a log line of this sync says."""
        return {name: getattr(self, name) for name in ("added", "updated", "deleted", "unchanged")}


def _model_name(embedder) -> str:
    return embedder.name if embedder is not None else ""


def write_records(
    store: IndexStore,
    records: Sequence[Record],
    embedder,
    report: SyncReport,
    *,
    hold: bool = False,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> None:
    """Upsert ``records``, embedding only those whose stored vector is missing or stale. ``hold``: the
    embedder keeps its buffers for the next write (``Embedder.embed_passages``), released by the caller.
    ``embed``: passages -> float32 ``(n, dim)`` vectors of ``embedder`` instead of its own
    ``embed_passages`` (the writer's: :meth:`memoryd.core.ahead.Ahead.embed`, which has some made ahead)."""
    if not records:
        return
    # numpy here, not at the top: the tool registry loads the kinds' record modules, and no numpy
    import numpy as np

    model = _model_name(embedder)
    stored = store.stored_hashes_for([r.id for r in records])
    reuse_ids = [
        r.id
        for r in records
        if r.id in stored
        and stored[r.id].model
        and stored[r.id].embed_hash == r.embed_hash
        and (embedder is None or stored[r.id].model == model)
    ]
    reuse = store.vectors(reuse_ids) if reuse_ids else {}
    for start in range(0, len(records), BATCH):
        chunk = list(records[start : start + BATCH])
        if embedder is None and not any(r.id in reuse for r in chunk):
            store.upsert(chunk, None, "")
            continue
        need = [r for r in chunk if r.id not in reuse]
        fresh: dict[str, np.ndarray] = {}
        if need and embedder is not None:
            texts = [r.embed_text for r in need]
            vecs = embed(texts) if embed is not None else embedder.embed_passages(texts, hold=hold)
            fresh = {r.id: vecs[i] for i, r in enumerate(need)}
            report.embedded += len(need)
        with_vec = [r for r in chunk if r.id in reuse or r.id in fresh]
        without = [r for r in chunk if r.id not in reuse and r.id not in fresh]
        if with_vec:
            mat = np.stack([reuse.get(r.id) if r.id in reuse else fresh[r.id] for r in with_vec])
            kept_model = model or next(stored[r.id].model for r in with_vec if r.id in stored)
            store.upsert(with_vec, mat.astype(np.float32), kept_model)
        if without:
            store.upsert(without, None, "")


def sync_records(
    store: IndexStore,
    desired: Iterable[Record],
    embedder,
    kinds: Sequence[str],
    keep: Collection[str] = (),
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> SyncReport:
    """Make the index's records of ``kinds`` equal ``desired`` plus ``keep``. Returns what changed.

    ``keep``: ids known unchanged without deriving their records (:mod:`memoryd.index.derive_cache`);
    they are counted as unchanged and never deleted. With ``embedder`` None, new and changed records are
    written keyword-only (``model == ""``) and get their vectors at the next sync with a model.
    ``embed``: as :func:`write_records`.
    """
    report = SyncReport()
    want = {r.id: r for r in desired}
    keep = set(keep) - want.keys()
    report.unchanged += len(keep)
    stored: dict = {}
    for kind in kinds:
        stored.update(store.stored_hashes(kind))
    model = _model_name(embedder)
    todo: list[Record] = []
    for rid, rec in want.items():
        old = stored.get(rid)
        if old is None:
            report.added += 1
            todo.append(rec)
        elif old.hash != rec.content_hash or (embedder is not None and old.model != model):
            report.updated += 1
            todo.append(rec)
        else:
            report.unchanged += 1
    gone = [rid for rid in stored if rid not in want and rid not in keep]
    write_records(store, todo, embedder, report, embed=embed)
    report.deleted = store.delete(gone)
    if report.changed:
        log.info("index_synced", **report.counts(), embedded=report.embedded)
    return report
