"""Importer for the reference MCP memory server's knowledge graph (``memory.jsonl``).

The format is that of github.com/modelcontextprotocol/servers, ``src/memory/index.ts`` (``saveGraph``): one
JSON object per line, either ``{"type":"entity","name","entityType","observations":[str]}`` or
``{"type":"relation","from","to","relationType"}``, where ``from``/``to`` are entity names.

Each entity becomes one memory (``memory_type`` ``fact``, tags ``mcp-memory`` and its entity type made one
word) whose content is::

    <name> (<entityType>)

    - <observation 1>
    - <observation 2>

so the name, the type and every observation are searchable. An entity name that appears on several lines
(the reference server never writes that, hand edits can) is one memory with the observations of all its lines,
in order, without repeats. Each relation becomes a relationship between the two entities' memories, its
``relationType`` made one word (whitespace runs become ``_``). A line that is not a JSON object (a truncated
last line, a stray edit), lacks a field or names an unknown ``type`` is reported with its number and skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.importers import ImportItem, ImportProblem, ImportRelation, read_lines
from memoryd.importers.values import MAX_TAG_CHARS, iso_utc, unique, word

DESCRIPTION = "the reference MCP memory server's knowledge graph (memory.jsonl)"
SOURCE_TAG = "mcp-memory"
MEMORY_TYPE = "fact"


@dataclass
class _Entity:
    name: str
    entity_type: str
    where: str
    observations: list[str] = field(default_factory=list)
    created_at: str | None = None


def render(name: str, entity_type: str, observations: list[str]) -> str:
    """The memory content of an entity (see the module doc)."""
    head = f"{name} ({entity_type})" if entity_type else name
    if not observations:
        return head
    return head + "\n\n" + "\n".join(f"- {o}" for o in observations)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def iter_items(path: Path) -> Iterator[ImportItem | ImportRelation | ImportProblem]:
    """Problems as they are met, then every entity (first-seen order), then every relation."""
    import json

    entities: dict[str, _Entity] = {}
    relations: list[ImportRelation] = []
    for n, raw in enumerate(read_lines(path), 1):
        where = f"line {n}"
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            yield ImportProblem(where, "not valid UTF-8")
            continue
        except ValueError:
            cut = "" if raw.endswith(b"\n") else " (truncated: the file ends inside this line)"
            yield ImportProblem(where, f"not valid JSON{cut}")
            continue
        if not isinstance(obj, dict):
            yield ImportProblem(where, "not a JSON object")
            continue
        kind = obj.get("type")
        if kind == "entity":
            name, etype, obs = obj.get("name"), obj.get("entityType"), obj.get("observations", [])
            if not isinstance(name, str) or not name.strip():
                yield ImportProblem(where, "entity without a name")
                continue
            if not isinstance(etype, str) or not _strings(obs):
                yield ImportProblem(
                    where, f"entity {name!r}: entityType must be text, observations a list of text"
                )
                continue
            entity = entities.get(name)
            if entity is None:
                entity = entities[name] = _Entity(
                    name, etype.strip(), where, created_at=iso_utc(obj.get("createdAt"))
                )
            entity.observations.extend(o for o in obs if o not in entity.observations)
        elif kind == "relation":
            src, dst, rtype = obj.get("from"), obj.get("to"), obj.get("relationType")
            if not all(isinstance(v, str) and v for v in (src, dst, rtype)):
                yield ImportProblem(where, "relation needs from, to and relationType as text")
                continue
            relations.append(ImportRelation(src, dst, word(rtype), where, iso_utc(obj.get("createdAt"))))
        else:
            yield ImportProblem(where, f"unknown type {str(kind)[:40]!r} (expected entity or relation)")
    for entity in entities.values():
        type_tag = word(entity.entity_type)
        yield ImportItem(
            key=entity.name,
            content=render(entity.name, entity.entity_type, entity.observations),
            where=entity.where,
            tags=unique([SOURCE_TAG, *([type_tag] if 0 < len(type_tag) <= MAX_TAG_CHARS else [])]),
            memory_type=MEMORY_TYPE,
            created_at=entity.created_at,
        )
    yield from relations
