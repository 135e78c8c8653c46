"""Export everything on the board to one JSONL file, and import such a file.

Export and import share one module (~410 lines) because they share the format below line for line.

File format (``memoryd-export`` v1), one JSON object per line::

    {"kind":"header","format":"memoryd-export","version":1,"created_at","include":[...],"counts":{...},
                     "redacted":{kind: n}}
    {"kind":"task", "id","title","project","status","created_at"}
    {"kind":"brief","id","task","project","created_at","title","summary","said","prompt","notes":[...],
                    "outcome":{"did":[...],"decided":[...],"open":[...],"files":[...],"retired":[...]}|null}
    {"kind":"memory","id","content","tags","importance","memory_type","created_at","accessed_at",
                     "project","origin","relations":[{"id","type","target","created_at"}]}
    {"kind":"interaction", ...Memory Core's Memory fields}          (board/sessions.py)
    {"kind":"summary", ...Memory Core's Summary fields}

``include`` kinds: ``briefs`` (tasks and briefs), ``memories``, ``interactions``, ``summaries``.
Screenshots are not exported (binary PNGs; a screen's text is searchable only while its PNG exists).

An export holds no secret redaction knows: every stored text is redacted as a whole (briefs as
:class:`BoardReader` reads them, memories and session items as their ``redacted()`` copies). A redacted
memory gets the id of its redacted content (an import checks ids), and edges pointing at it follow. The
header's ``redacted`` counts the secrets redacted from the board's texts as they were exported, never a
placeholder a text held already (capture redacts a prompt and a turn before it stores them).

Import reads the file through the same gate as board files (a regular file, no symlink, one link, at
most :data:`MAX_IMPORT_BYTES`), validates EVERY line first and reports each rejected line by number
(a torn last line included). ``merge`` writes what is missing and keeps what is there. ``replace``
refuses the whole file when any line was rejected (nothing changes); otherwise, for each kind the file
includes, it removes what the board holds that the file does not and writes the file's items. Only
board files are written: the index follows through the watcher or a rescan.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from memoryd.board.atomic import temp_name
from memoryd.board.gate import UnsafePath, check_brief_id, is_brief_id, is_task_id, open_root
from memoryd.index.redact import tally
from memoryd.kinds.briefs.files import OUTCOME_SECTIONS, FormatError, Outcome, parse_task, render_outcome
from memoryd.kinds.briefs.reader import BRIEFS_DIR, TASKS_DIR, BoardReader
from memoryd.kinds.briefs.writer import ensure_board
from memoryd.kinds.memories.files import (
    Memory,
    Relation,
    content_hash,
    delete_memory,
    list_memories,
    parse_memory,
    render_memory,
    write_memory,
)
from memoryd.kinds.sessions import files as sess
from memoryd.logs import get_logger

T = TypeVar("T")

log = get_logger("memoryd.importers.exchange")

FORMAT = "memoryd-export"
VERSION = 1
KINDS = ("briefs", "memories", "interactions", "summaries")
MAX_IMPORT_BYTES = 512 * 2**20
_TYPE_KIND = {
    "task": "briefs",
    "brief": "briefs",
    "memory": "memories",
    "interaction": "interactions",
    "summary": "summaries",
}


class ExchangeError(Exception):
    """The file cannot be imported at all (unreadable, not an export, replace refused); message says why."""


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _memory_obj(m: Memory) -> dict[str, Any]:
    return {
        "kind": "memory", "id": m.id, "content": m.content, "tags": list(m.tags), "importance": m.importance,
        "memory_type": m.memory_type, "created_at": m.created_at, "accessed_at": m.accessed_at,
        "project": m.project, "origin": m.origin,
        "relations": [asdict(r) for r in m.relations],
    }  # fmt: skip


def iter_export(board: Path, include: tuple[str, ...] = KINDS):
    """Yield the export's objects (header last is not possible in a stream: counts come in the header
    of :func:`export_file`, which collects first)."""
    if "briefs" in include:
        snap = BoardReader(board, screens=False).load()  # not exported
        for t in sorted(snap.tasks.values(), key=lambda t: t.id):
            yield {"kind": "task", **t.to_json()}
        for b in sorted(snap.briefs.values(), key=lambda b: b.id):
            yield {
                "kind": "brief", "id": b.id, "task": b.task, "project": b.project, "created_at": b.created_at,
                "title": b.title, "summary": b.summary, "said": b.said, "prompt": b.prompt,
                "notes": list(b.notes),
                "outcome": None if b.outcome is None else {n: list(getattr(b.outcome, n)) for n, _ in OUTCOME_SECTIONS},
            }  # fmt: skip
    if "memories" in include:
        memories = [m.redacted() for m in list_memories(board)[0]]
        # Content addressing: a redacted content is another memory, with its own id (see the module docstring).
        moved = {m.id: h for m in memories if (h := content_hash(m.content)) != m.id and m.content}
        for m in memories:
            relations = tuple(replace(r, target=moved.get(r.target, r.target)) for r in m.relations)
            yield _memory_obj(replace(m, id=moved.get(m.id, m.id), relations=relations))
    if "interactions" in include or "summaries" in include:
        for sid in _session_ids(board):
            # A file the gate refuses (a planted symlink, a FIFO...) or a broken summary is skipped, as
            # every other reader does; one such file must not fail the whole export.
            if "interactions" in include:
                slog = _session_file(sess.read_log, board, sid, "interactions")
                for i in slog.interactions if slog else ():
                    yield {"kind": "interaction", **i.redacted().to_json()}
            if "summaries" in include:
                s = _session_file(sess.read_summary, board, sid, "summary")
                if s is not None:
                    yield {"kind": "summary", **s.redacted().to_json()}


def _session_ids(board: Path) -> list[str]:
    """The board's session ids; none (logged) when ``sessions`` is a file or a symlink the gate refuses,
    which the engine skips too: the other kinds are still exported."""
    try:
        return sess.list_sessions(board)
    except UnsafePath as exc:
        log.warning("export_skipped", what="sessions", error=str(exc))
        return []


def _session_file(read: Callable[[Path, str], T], board: Path, sid: str, what: str) -> T | None:
    """``read(board, sid)``, or None (logged) for a file the gate refuses or that is broken."""
    try:
        return read(board, sid)
    except (UnsafePath, OSError, ValueError) as exc:
        log.warning("export_skipped", session=sid, what=what, error=str(exc))
        return None


def export_file(board: Path, dest: Path, include: tuple[str, ...] = KINDS) -> dict[str, Any]:
    """Write the export of ``board`` to ``dest`` (temp + rename, mode 0600); returns
    ``{"path","bytes","include","counts":{type: n},"redacted":{secret kind: n}}``."""
    from memoryd.kinds.sessions.files import now_iso

    with tally() as redacted:  # the secrets redacted from the board's texts now, not what they held already
        objs = list(iter_export(board, include))
    counts = Counter(o["kind"] for o in objs)
    body = b"".join(_line(o) for o in objs)
    header = {"kind": "header", "format": FORMAT, "version": VERSION, "created_at": now_iso(),
              "include": list(include), "counts": dict(sorted(counts.items())),
              "redacted": dict(sorted(redacted.items()))}  # fmt: skip
    data = _line(header) + body
    dest = Path(dest).absolute()
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dest.with_name(temp_name(dest.name))  # a start sweeps the exports folder of killed writes' temps
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return {"path": str(dest), "bytes": len(data), "include": list(include), "counts": header["counts"],
            "redacted": header["redacted"]}  # fmt: skip


# --- import -------------------------------------------------------------------------------------------


@dataclass
class Parsed:
    """A validated import file: objects by kind, the rejected lines, and the kinds the file covers."""

    kinds: set[str] = field(default_factory=set)
    tasks: list[dict] = field(default_factory=list)
    briefs: list[dict] = field(default_factory=list)
    memories: list[Memory] = field(default_factory=list)
    interactions: list[sess.Interaction] = field(default_factory=list)
    summaries: list[sess.Summary] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0


def read_import_file(path: Path) -> bytes:
    """The file's bytes through the board gate (its folder as the root). Raises ExchangeError."""
    path = Path(path).absolute()
    try:
        with open_root(path.parent) as d:
            return d.read_bytes(path.name, MAX_IMPORT_BYTES)
    except FileNotFoundError:
        raise ExchangeError(f"{path} does not exist") from None
    except OSError as exc:
        raise ExchangeError(f"{path} cannot be read: {exc.strerror or exc}") from None
    except Exception as exc:  # UnsafePath: symlink, FIFO, hard link, too large
        raise ExchangeError(f"{path} is refused: {exc}") from None


def _check_brief(obj: dict) -> dict:
    check_brief_id(obj.get("id"))
    if not is_task_id(obj.get("task")):
        raise FormatError("'task' is not a task id")
    for key in ("project", "created_at", "title", "summary", "said", "prompt"):
        if not isinstance(obj.get(key, ""), str):
            raise FormatError(f"{key!r} must be a string")
    notes = obj.get("notes") or []
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise FormatError("'notes' must be a list of strings")
    out = obj.get("outcome")
    if out is not None and (
        not isinstance(out, dict)
        or not all(
            isinstance(out.get(n, []), list) and all(isinstance(x, str) for x in out.get(n, []))
            for n, _ in OUTCOME_SECTIONS
        )
    ):
        raise FormatError("'outcome' must map each section to a list of strings")
    return obj


def _check_memory(obj: dict) -> Memory:
    rels = tuple(
        Relation(**{k: r[k] for k in ("id", "type", "target", "created_at")})
        for r in obj.get("relations") or []
    )
    m = Memory(
        id=obj.get("id"), content=obj.get("content"), tags=tuple(obj.get("tags") or ()),
        importance=obj.get("importance", 0), memory_type=obj.get("memory_type", "general"),
        created_at=obj.get("created_at", ""), accessed_at=obj.get("accessed_at", ""),
        project=obj.get("project", ""), relations=rels, origin=obj.get("origin"),
    )  # fmt: skip
    if not isinstance(m.id, str) or not isinstance(m.content, str):
        raise FormatError("'id' and 'content' must be strings")
    # Content addressing: an id that is not the hash of its content would shadow the memory that hash
    # names (a later store_memory of that text would be answered "exists" with other content).
    if m.id != content_hash(m.content):
        raise FormatError("'id' is not the SHA-256 of the normalised content (edited after export?)")
    return parse_memory(render_memory(m), m.id)  # the board's own field rules (path: memories/<id>.md)


def parse_import(data: bytes) -> Parsed:
    """Validate every line (never raises for content; see :class:`Parsed`)."""
    out = Parsed()
    lines = data.split(b"\n")
    torn = lines[-1] != b""
    if not torn:
        lines.pop()
    out.lines = len(lines)
    header_seen = False
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            if not isinstance(obj, dict):
                raise FormatError("not a JSON object")
            kind = obj.get("kind")
            if kind == "header":
                if obj.get("format") != FORMAT or obj.get("version") != VERSION:
                    raise FormatError(f"not a {FORMAT} v{VERSION} header")
                header_seen = True
                out.kinds.update(k for k in obj.get("include") or () if k in KINDS)
                continue
            body = {k: v for k, v in obj.items() if k != "kind"}
            if kind == "task":
                out.tasks.append(parse_task(json.dumps(body), body.get("id")).to_json())
            elif kind == "brief":
                out.briefs.append(_check_brief(body))
            elif kind == "memory":
                out.memories.append(_check_memory(body))
            elif kind == "interaction":
                out.interactions.append(sess.parse_interaction(body))
            elif kind == "summary":
                out.summaries.append(sess.parse_summary(body))
            else:
                raise FormatError(f"unknown kind {kind!r}")
            if not header_seen:
                out.kinds.add(_TYPE_KIND[kind])
        except (
            UnicodeDecodeError,
            json.JSONDecodeError,
            RecursionError,
            ValueError,
            TypeError,
            KeyError,
        ) as exc:
            reason = (
                str(exc)
                if isinstance(exc, ValueError | KeyError) and not isinstance(exc, json.JSONDecodeError)
                else type(exc).__name__
            )
            if isinstance(exc, json.JSONDecodeError):
                reason = f"not JSON ({exc.msg})"
            if torn and n == len(lines):
                reason = f"torn last line: {reason}"
            out.rejected.append((n, reason[:300]))
    return out


def _write_brief(board: Path, b: dict, overwrite: bool) -> bool:
    folder = board / BRIEFS_DIR / b["id"]
    if folder.exists() and not overwrite:
        return False
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    meta = {k: b[k] for k in ("id", "task", "project", "created_at", "title", "summary")}
    files = {"brief.json": json.dumps(meta, ensure_ascii=False, indent=2) + "\n", "said.txt": b.get("said", ""),
             "prompt.md": b.get("prompt", ""), "notes.md": "".join(f"- {n}\n" for n in b.get("notes") or [])}  # fmt: skip
    if b.get("outcome") is not None:
        files["outcome.md"] = render_outcome(Outcome(**{n: tuple(v) for n, v in b["outcome"].items()}))
    with open_root(board) as root, root.child(BRIEFS_DIR) as briefs, briefs.child(b["id"]) as d:
        for name, text in files.items():
            sess.write_atomic(d, name, text.encode("utf-8"))
    return True


def _write_task(board: Path, t: dict, overwrite: bool) -> bool:
    with open_root(board) as root, root.child(TASKS_DIR) as d:
        name = f"{t['id']}.json"
        if not overwrite and d.is_safe_file(name):
            return False
        sess.write_atomic(d, name, (json.dumps(t, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    return True


def apply_import(board: Path, parsed: Parsed, mode: str) -> dict[str, Any]:
    """Write ``parsed`` onto ``board`` (``merge`` | ``replace``); returns ``{"written","kept","removed"}``
    counts by kind, and ``"refused"`` when a session's turns would take its log past
    :data:`memoryd.kinds.sessions.files.MAX_LOG_BYTES` (the first turns that fit are written, the rest
    counted there). ``replace`` with rejected lines raises ExchangeError before touching anything."""
    if mode == "replace" and parsed.rejected:
        shown = "; ".join(f"line {n}: {why}" for n, why in parsed.rejected[:10])
        raise ExchangeError(
            f"replace refused: {len(parsed.rejected)} line(s) rejected ({shown}); nothing was changed"
        )
    ensure_board(board)
    replace = mode == "replace"
    written: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    if replace and "briefs" in parsed.kinds:
        keep_t, keep_b = {t["id"] for t in parsed.tasks}, {b["id"] for b in parsed.briefs}
        for p in (board / TASKS_DIR).glob("*.json"):
            if is_task_id(p.stem) and p.stem not in keep_t:
                p.unlink()
                removed["task"] += 1
        for p in (board / BRIEFS_DIR).iterdir():
            if is_brief_id(p.name) and p.name not in keep_b and not p.is_symlink():
                shutil.rmtree(p)
                removed["brief"] += 1
    for t in parsed.tasks:
        (written if _write_task(board, t, replace) else kept)["task"] += 1
    for b in parsed.briefs:
        (written if _write_brief(board, b, replace) else kept)["brief"] += 1
    if replace and "memories" in parsed.kinds:
        keep = {m.id for m in parsed.memories}
        for m in list_memories(board)[0]:
            if m.id not in keep and delete_memory(board, m.id):
                removed["memory"] += 1
    for m in parsed.memories:
        _, new = write_memory(board, m, overwrite=replace)
        (written if new or replace else kept)["memory"] += 1
    refused: Counter[str] = Counter()
    _apply_sessions(board, parsed, replace, written, kept, removed, refused)
    out: dict[str, Any] = {"written": dict(written), "kept": dict(kept), "removed": dict(removed)}
    if refused:
        out["refused"] = dict(refused)  # a session's turns past the most its log may hold
    return out


def _apply_sessions(board: Path, parsed: Parsed, replace: bool, written: Counter, kept: Counter,
                    removed: Counter, refused: Counter) -> None:  # fmt: skip
    by_session: dict[str, list[sess.Interaction]] = {}
    for i in parsed.interactions:
        by_session.setdefault(i.session_id, []).append(i)
    if replace:
        for sid in sess.list_sessions(board):
            if "interactions" in parsed.kinds and sid not in by_session:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(board / sess.SESSIONS_DIR / (sid + sess.LOG_SUFFIX))
                    removed["session"] += 1
            if "summaries" in parsed.kinds and sid not in {s.session_id for s in parsed.summaries}:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(board / sess.SESSIONS_DIR / (sid + sess.SUMMARY_SUFFIX))
                    removed["summary"] += 1
    for sid, items in by_session.items():
        have = [] if replace else ((sess.read_log(board, sid) or sess.SessionLog(sid)).interactions)
        ids = {i.id for i in have}
        new = []
        for i in items:
            if i.id not in ids:
                ids.add(i.id)
                new.append(i)
        kept["interaction"] += len(items) - len(new)
        fit = sess.fitting(have, new)
        if fit < len(new):  # the rest would make a log memoryd refuses to read: counted as refused instead
            refused["interaction"] += len(new) - fit
            log.warning("import_session_full", session=sid, refused=len(new) - fit, written=fit)
            new = new[:fit]
        if new or replace:
            sess.write_log(board, sid, [*have, *new])
        written["interaction"] += len(new)
    for s in parsed.summaries:
        if not replace and sess.read_summary(board, s.session_id) is not None:
            kept["summary"] += 1
            continue
        sess.write_summary(board, s)
        written["summary"] += 1


def import_file(board: Path, path: Path, mode: str = "merge") -> dict[str, Any]:
    """Read, validate and apply an export file. Returns ``{"file","mode","lines","written","kept",
    "removed","rejected":[{"line","reason"}]}``; raises ExchangeError (unreadable, replace refused)."""
    parsed = parse_import(read_import_file(path))
    if not parsed.kinds and not parsed.rejected:
        raise ExchangeError(f"{path} holds no export lines")
    result = apply_import(Path(board), parsed, mode)
    return {
        "file": str(Path(path).absolute()),
        "mode": mode,
        "lines": parsed.lines,
        **result,
        "rejected": [{"line": n, "reason": why} for n, why in parsed.rejected],
    }
