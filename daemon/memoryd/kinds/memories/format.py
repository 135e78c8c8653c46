"""The memory file format: ``memories/<hash>.md``, identity, front matter, parsing and rendering.

Identity
    ``<hash>`` is the SHA-256 (64 lowercase hex) of the memory's content after :func:`normalize_content`:

    1. ``\\r\\n`` -> ``\\n`` (a lone ``\\r`` is kept: only Windows line ends are folded);
    2. Unicode NFC (so NFC and NFD spellings of "café" are one memory);
    3. trailing whitespace at the end of the content trimmed (``str.rstrip``; leading whitespace and
       whitespace at the ends of inner lines are kept).

    Text holding a lone surrogate (``"\\ud800"``, which JSON can carry but UTF-8 cannot) raises
    ``ValueError``: it is invalid input, never stored. The content written to the file is the normalised
    content, so for a file written by memoryd ``content_hash(body) == <hash>``.

File format
    YAML front matter between ``---`` lines, then the content, then one ``\\n``::

        ---
        tags: [deploy, ci]            # a YAML list of strings without whitespace (written one per line)
        importance: 3                 # integer 0-10 (default 0)
        memory_type: decision         # one of MEMORY_TYPES (default "general")
        created_at: '2026-01-05T10:00:00Z'   # ISO-8601 (memoryd writes UTC; any form Python reads is kept as written)
        accessed_at: '2026-01-06T08:00:00Z'  # last time a search or read returned it (ISO-8601)
        project: shopfront            # '' when none (the session's git root folder name)
        origin: memo                  # optional free string: "memo", "import:memdb", ... (who wrote it)
        relations:                    # edges FROM this memory (stored with their source: deleting a
        - id: 5f0c...                 #   memory deletes its edges); id = 32 lowercase hex
          type: depends_on            #   1-50 characters, no whitespace
          target: 9a1b...             #   hash of the target memory (64 hex)
          created_at: '2026-01-05T10:00:00Z'
        ---
        The content, verbatim (Markdown or any text).

    The front matter is dumped and parsed with python-frontmatter's YAML handler (``yaml.safe_*``). The
    body is split off here rather than by ``frontmatter.loads``, which strips the body: the content must
    round-trip byte for byte, leading blank lines included. Unknown front-matter keys are kept (``extra``)
    and written back, so a developer's own keys survive memoryd's rewrites.

Hand edits
    A file edited in an editor so that its content no longer hashes to its file name keeps its file name
    as its identity (:attr:`Memory.id`: relations, ``get_memory`` and deletes use it), while
    :attr:`Memory.hash` is the hash of the content as it is now. memoryd never renames a file behind the
    developer's back (it would fight the editor's own save); ``update_memory`` through a tool moves it to
    its new name. A relation's ``target`` names a memory the way a key does: the file of that name, else
    the file whose content hashes to it; so a file renamed by hand (another ``<64 hex>.md`` name, the same
    content) keeps the edges pointing at it, in every answer and through every rewrite of the files that
    hold them. A file whose name is not ``<64 hex>.md``, or whose front matter is not valid YAML, holds a
    value YAML cannot convert (``created_at: 2026-13-45``) or breaks the field rules above, is skipped with
    a log line (:class:`MemoryFileError`), never the board.

File I/O (atomic writes through the gate) is :mod:`memoryd.kinds.memories.files`, which re-exports this module.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import sys
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from types import MappingProxyType
from typing import Any

import frontmatter
import yaml

from memoryd.index.redact import redact
from memoryd.textcheck import has_lone_surrogate

MEMORIES_DIR = "memories"
#: The ``extra`` of a memory without unknown front-matter keys (one shared, read-only mapping).
NO_EXTRA: Mapping[str, Any] = MappingProxyType({})
MEMORY_TYPES: tuple[str, ...] = (
    "general",
    "fact",
    "plan",
    "decision",
    "reflection",
    "lesson",
    "error",
    "gradient",
)
IMPORTANCE_MAX = 10
RELATION_TYPE_MAX = 50
HASH_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)
RELATION_ID_RE = re.compile(r"[0-9a-f]{32}", re.ASCII)
_FILE_RE = re.compile(r"([0-9a-f]{64})\.md", re.ASCII)
_NO_SPACE = re.compile(r"\S+")
# The front matter block: an opening "---" line, YAML, a closing "---" line; the rest is the body.
_FRONT = re.compile(r"\A---[ \t]*\r?\n(?:(.*?)\r?\n)?---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_KNOWN_KEYS = (
    "tags",
    "importance",
    "memory_type",
    "created_at",
    "accessed_at",
    "project",
    "origin",
    "relations",
)
_YAML = frontmatter.YAMLHandler()
# libyaml's safe loader/dumper when PyYAML was built with it (same safe subset, ~10x faster: a board of
# 100,000 memories is parsed at every daemon start).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class MemoryFileError(ValueError):
    """A memory file that cannot be used (bad name, YAML, field, UTF-8, or refused by the gate).

    ``path`` is board-relative; ``reason`` says why. The reader skips the file and logs it.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def utc_now() -> str:
    """The current time as ISO-8601 UTC with seconds, ``2026-01-05T10:00:00Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize_content(text: str) -> str:
    """The normalised content (module docstring, "Identity"). Raises ValueError on a lone surrogate."""
    if has_lone_surrogate(text):
        raise ValueError("text contains a lone surrogate (not valid Unicode): send UTF-8 text")
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n")).rstrip()


def content_hash(text: str) -> str:
    """SHA-256 hex of ``normalize_content(text)`` encoded as UTF-8 (the memory id)."""
    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def is_hash(value: object) -> bool:
    """True for a 64-character lowercase hex string (never raises)."""
    return isinstance(value, str) and len(value) == 64 and HASH_RE.fullmatch(value) is not None


def check_hash(value: object) -> str:
    """Return ``value`` if it is a memory hash; else raise :class:`memoryd.board.gate.InvalidId`."""
    from memoryd.board.gate import InvalidId

    if is_hash(value):
        return value  # type: ignore[return-value]
    shown = repr(value) if not isinstance(value, str) or len(value) <= 70 else repr(value[:70]) + "..."
    raise InvalidId(f"invalid memory hash {shown}: expected 64 lowercase hex characters (SHA-256)")


def memory_path(memory_id: str) -> str:
    """The board-relative path of the memory named ``memory_id``: ``memories/<memory_id>.md``."""
    return f"{MEMORIES_DIR}/{memory_id}.md"


def relation_id() -> str:
    """A new relation id: 32 random lowercase hex characters."""
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class Relation:
    """A directed, typed edge stored in its source memory's file."""

    id: str
    type: str
    target: str
    created_at: str


# The daemon keeps every memory as parsed (the memories' view): slots, and no dict of unknown keys or
# repeated small string per memory, hold 10,000 of them in ~2 MiB less.
@dataclass(frozen=True, slots=True)
class Memory:
    """One memory file. ``id`` is the file name's hash (the identity); see :attr:`hash`."""

    id: str
    content: str
    tags: tuple[str, ...] = ()
    importance: int = 0
    memory_type: str = "general"
    created_at: str = ""
    accessed_at: str = ""
    project: str = ""
    relations: tuple[Relation, ...] = ()
    origin: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def hash(self) -> str:
        """SHA-256 of the content as it is now (differs from :attr:`id` only after a hand edit)."""
        return content_hash(self.content)

    @property
    def path(self) -> str:
        """Board-relative path of the file."""
        return memory_path(self.id)

    @classmethod
    def new(cls, content: str, **fields: Any) -> Memory:
        """A memory for ``content`` (normalised here; ValueError on lone surrogates or empty content),
        id = its hash, ``created_at``/``accessed_at`` = now unless given."""
        text = normalize_content(content)
        if not text:
            raise ValueError("content is empty after normalisation (whitespace only)")
        now = utc_now()
        fields.setdefault("created_at", now)
        fields.setdefault("accessed_at", fields["created_at"])
        return cls(id=hashlib.sha256(text.encode()).hexdigest(), content=text, **fields)

    def with_(self, **changes: Any) -> Memory:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    def redacted(self) -> Memory:
        """A copy whose every stored text (content, each tag, project, origin, times, relation types) is
        redacted as a whole (:func:`memoryd.index.redact.redact`), for what leaves the board: index records
        and exports. ``id`` is kept; unknown front-matter keys are dropped. Never written back."""

        def clean(text: str) -> str:
            return redact(text).text if text else text

        return replace(
            self,
            content=clean(self.content),
            tags=tuple(clean(t) for t in self.tags),
            created_at=clean(self.created_at),
            accessed_at=clean(self.accessed_at),
            project=clean(self.project),
            origin=None if self.origin is None else clean(self.origin),
            relations=tuple(replace(r, type=clean(r.type)) for r in self.relations),
            extra={},
        )


# --- text <-> Memory ----------------------------------------------------------------------------------


def render_memory(memory: Memory) -> str:
    """The file text of ``memory`` (module docstring, "File format")."""
    meta: dict[str, Any] = {
        "tags": list(memory.tags),
        "importance": int(memory.importance),
        "memory_type": memory.memory_type,
        "created_at": memory.created_at,
        "accessed_at": memory.accessed_at,
        "project": memory.project,
    }
    if memory.origin is not None:
        meta["origin"] = memory.origin
    meta["relations"] = [
        {"id": r.id, "type": r.type, "target": r.target, "created_at": r.created_at} for r in memory.relations
    ]
    for key, value in memory.extra.items():
        if key not in meta:
            meta[key] = value
    head = _YAML.export(meta, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=1 << 30)
    return f"---\n{head}\n---\n{memory.content}\n"


def _text(value: Any, what: str, path: str) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):  # unquoted timestamps are parsed by YAML
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str | int | float):
        return str(value)
    raise MemoryFileError(path, f"{what} must be a string")


def _time(value: Any, what: str, path: str) -> str:
    """A timestamp field as written, or '' when absent. Raises MemoryFileError unless it is ISO-8601 (what
    ``datetime.fromisoformat`` reads, as for briefs): "not a date" would sort as the newest memory and
    never age, so the file is refused like any other broken field."""
    text = _text(value, what, path)
    if text:
        try:
            datetime.fromisoformat(text)
        except ValueError:
            raise MemoryFileError(
                path, f"{what} is not an ISO-8601 time (like 2026-01-05T10:00:00Z)"
            ) from None
    return text


def _importance(value: object, path: str | None) -> int:
    """The front matter's ``importance`` (absent or null: 0). Raises MemoryFileError unless it is a whole
    number 0-10; YAML's ``.inf`` and ``.nan`` are floats too, refused like any other."""
    if value is None:
        return 0
    whole = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value == int(value)
    )
    if not whole or not 0 <= int(value) <= IMPORTANCE_MAX:
        raise MemoryFileError(path, f"importance must be an integer 0-{IMPORTANCE_MAX}")
    return int(value)


def _relations(raw: Any, path: str) -> tuple[Relation, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MemoryFileError(path, "relations must be a list")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise MemoryFileError(path, f"relations[{i}] must be a mapping")
        rid, rtype, target = (
            _text(item.get(k), f"relations[{i}].{k}", path) for k in ("id", "type", "target")
        )
        if not RELATION_ID_RE.fullmatch(rid):
            raise MemoryFileError(path, f"relations[{i}].id must be 32 lowercase hex characters")
        if not (0 < len(rtype) <= RELATION_TYPE_MAX) or not _NO_SPACE.fullmatch(rtype):
            raise MemoryFileError(path, f"relations[{i}].type must be 1-50 characters without whitespace")
        if not is_hash(target):
            raise MemoryFileError(path, f"relations[{i}].target must be a memory hash (64 hex)")
        out.append(
            Relation(
                rid,
                sys.intern(rtype),
                target,
                _time(item.get("created_at"), f"relations[{i}].created_at", path),
            )
        )
    return tuple(out)


def shared(memory: Memory) -> Memory:
    """``memory`` with the strings many memories repeat (tags, type, project, origin, an access time equal
    to the creation time) shared as :func:`parse_memory` shares them: the view holds every memory."""
    m = memory
    return replace(
        m,
        tags=tuple(sys.intern(t) for t in m.tags),
        memory_type=sys.intern(m.memory_type),
        project=sys.intern(m.project),
        origin=None if m.origin is None else sys.intern(m.origin),
        accessed_at=m.created_at if m.accessed_at == m.created_at else m.accessed_at,
        extra=m.extra or NO_EXTRA,
    )


def parse_memory(text: str, memory_id: str, path: str | None = None) -> Memory:
    """Parse a memory file's text; raises :class:`MemoryFileError` for a broken one."""
    path = path or memory_path(memory_id)
    if has_lone_surrogate(text):
        raise MemoryFileError(path, "lone surrogate in text")
    m = _FRONT.match(text)
    if m is None:
        raise MemoryFileError(path, "no front matter (the file must start with a '---' line)")
    try:
        meta = _YAML.load(m.group(1), Loader=_LOADER) if (m.group(1) or "").strip() else {}
    except yaml.YAMLError as exc:
        raise MemoryFileError(path, f"front matter is not valid YAML: {str(exc).splitlines()[0]}") from None
    except (ValueError, OverflowError) as exc:
        # valid YAML whose value the loader cannot build (2026-13-45, a number of 5,000 digits); the
        # exception's text may quote the value, so only its kind is said
        raise MemoryFileError(
            path,
            f"front matter holds a value YAML cannot convert ({type(exc).__name__}: a date or time that "
            "does not exist, or a number too long)",
        ) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise MemoryFileError(path, "front matter must be a mapping")
    tags_raw = meta.get("tags") or []
    if isinstance(tags_raw, str):
        tags_raw = tags_raw.split()
    if not isinstance(tags_raw, list):
        raise MemoryFileError(path, "tags must be a list")
    tags = tuple(
        dict.fromkeys(sys.intern(_text(t, "tag", path)) for t in tags_raw if t is not None and str(t) != "")
    )
    if any(not _NO_SPACE.fullmatch(t) for t in tags):
        raise MemoryFileError(path, "tags must not contain whitespace")
    memory_type = _text(meta.get("memory_type"), "memory_type", path) or "general"
    if memory_type not in MEMORY_TYPES:
        raise MemoryFileError(path, f"memory_type must be one of {', '.join(MEMORY_TYPES)}")
    origin = meta.get("origin")
    content = normalize_content(text[m.end() :])
    if not content:
        raise MemoryFileError(path, "empty content")
    created = _time(meta.get("created_at"), "created_at", path)
    accessed = _time(meta.get("accessed_at"), "accessed_at", path)
    extra = {k: v for k, v in meta.items() if k not in _KNOWN_KEYS}
    return Memory(
        id=memory_id,
        content=content,
        tags=tags,
        importance=_importance(meta.get("importance"), path),
        memory_type=sys.intern(memory_type),
        created_at=created,
        accessed_at=created if accessed in ("", created) else accessed,  # one string when they are equal
        project=sys.intern(_text(meta.get("project"), "project", path)),
        relations=_relations(meta.get("relations"), path),
        origin=None if origin is None else sys.intern(_text(origin, "origin", path)),
        extra=extra or NO_EXTRA,
    )
