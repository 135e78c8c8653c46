"""The memory graph, read from the in-memory view: edges of one memory, and the cluster around seeds.

Edges are stored with their source memory (``relations`` in its front matter); a target is resolved
like a key (:meth:`memoryd.kinds.memories.source.MemorySource.resolve`: file name, else current content hash),
and edges name the resolved id. An edge whose target no longer exists is *dangling*: it is never returned, and its ids are reported so the caller can clean
it out of the source file (:meth:`memoryd.kinds.memories.api.Memories.relationships`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from memoryd.kinds.memories.files import Memory, Relation
from memoryd.kinds.memories.source import MemorySource

DIRECTIONS = ("outgoing", "incoming", "both")
#: memdb's cap on the memories one recall returns.
MAX_CLUSTER = 50


@dataclass(frozen=True)
class Edge:
    """A directed, typed relationship ``from_id -> to_id`` (memdb: ``from_hash``/``to_hash``)."""

    id: str
    from_id: str
    to_id: str
    type: str
    created_at: str

    @classmethod
    def of(cls, source: Memory, relation: Relation, to_id: str | None = None) -> Edge:
        """The edge of ``relation`` stored in ``source``; ``to_id``: its resolved target (default: as
        stored)."""
        return cls(relation.id, source.id, to_id or relation.target, relation.type, relation.created_at)

    def as_dict(self) -> dict[str, str]:
        """memdb's ``Relationship`` shape."""
        return {
            "id": self.id,
            "from_hash": self.from_id,
            "to_hash": self.to_id,
            "relation_type": self.type,
            "created_at": self.created_at,
        }


def _sort_key(e: Edge) -> tuple[str, ...]:
    # memdb orders by relation_type, from_hash, to_hash, created_at, id
    return (e.type, e.from_id, e.to_id, e.created_at, e.id)


def edges_of(
    view: MemorySource, memory: Memory, direction: str = "both", relation_type: str | None = None
) -> tuple[list[Edge], set[str]]:
    """Live edges of ``memory`` in ``direction``, sorted; and the ids of memories holding dangling edges
    (``memory`` itself when one of its targets is gone)."""
    edges: list[Edge] = []
    dangling: set[str] = set()
    if direction in ("outgoing", "both"):
        for r in memory.relations:
            target = view.resolve(r.target)
            if target is None:
                dangling.add(memory.id)
            else:
                edges.append(Edge.of(memory, r, target))
    if direction in ("incoming", "both"):
        edges.extend(Edge.of(src, r, memory.id) for src, r in view.incoming(memory.id) if src.id != memory.id)
    if relation_type is not None:
        edges = [e for e in edges if e.type == relation_type]
    return sorted(set(edges), key=_sort_key), dangling


def cluster(
    view: MemorySource, seeds: Iterable[str], depth: int, cap: int = MAX_CLUSTER
) -> tuple[dict[str, int], list[Edge]]:
    """Breadth-first walk from ``seeds`` over edges in both directions, up to ``depth`` hops.

    Returns ``{memory id: hops from the nearest seed}`` (at most ``cap`` memories, nearest first, seeds
    in their given order) and every edge between two returned memories, sorted like memdb's.
    """
    hops: dict[str, int] = {}
    queue: deque[str] = deque()
    for s in seeds:
        if s not in hops and view.get(s) is not None and len(hops) < cap:
            hops[s] = 0
            queue.append(s)
    while queue:
        current = queue.popleft()
        d = hops[current]
        if d >= depth:
            continue
        m = view.get(current)
        if m is None:
            continue
        outgoing = [view.resolve(r.target) for r in m.relations]
        neighbours = [n for n in outgoing if n is not None] + [src.id for src, _ in view.incoming(current)]
        for n in neighbours:
            if n in hops:
                continue
            if len(hops) >= cap:
                queue.clear()
                break
            hops[n] = d + 1
            queue.append(n)
    edges: set[Edge] = set()
    for mid in hops:
        m = view.get(mid)
        if m is None:
            continue
        for r in m.relations:
            target = view.resolve(r.target)
            if target in hops:
                edges.add(Edge.of(m, r, target))
    return hops, sorted(edges, key=_sort_key)
