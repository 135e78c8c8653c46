"""The memories view: every memory as ``get_memory`` answers it (redacted), its tags and relations, and a
small graph of the most connected ones, drawn server-side as inline SVG (no script, no layout library).

The graph: up to :data:`GRAPH_MEMORIES` memories, those with the most relations first, on an outer circle;
tags two or more of them share on an inner circle. A line between two memories is a relation (its type
in the line's tooltip); a dashed line joins a memory to its tag. Each memory is a link to its entry in the
list, so the graph is usable from the keyboard.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.kinds.memories.graph import Edge
from memoryd.web.html import age, delete_form, esc, url

GRAPH_MEMORIES = 24
GRAPH_TAGS = 12
LABEL_CHARS = 22
SIZE = 640  # the SVG's viewBox is SIZE x SIZE; it scales to the page's width


def _label(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def graph_svg(memories: Sequence[Mapping[str, Any]], edges: Sequence[Edge]) -> str:
    """``memories``: memory answers (``id``, ``content``, ``tags``); ``edges``: relations among them and
    others (only those between two drawn memories are drawn). Empty string when there is nothing to draw."""
    degree: dict[str, int] = {}
    for e in edges:
        degree[e.from_id] = degree.get(e.from_id, 0) + 1
        degree[e.to_id] = degree.get(e.to_id, 0) + 1
    ranked = sorted(memories, key=lambda m: (-degree.get(m["id"], 0), -len(m["tags"]), m["id"]))
    nodes = ranked[:GRAPH_MEMORIES]
    if not nodes:
        return ""
    ids = {m["id"] for m in nodes}
    tag_count: dict[str, int] = {}
    for m in nodes:
        for t in m["tags"]:
            tag_count[t] = tag_count.get(t, 0) + 1
    tags = sorted((t for t, n in tag_count.items() if n >= 2), key=lambda t: (-tag_count[t], t))[:GRAPH_TAGS]
    c = SIZE / 2

    def ring(n: int, radius: float) -> list[tuple[float, float]]:
        return [
            (
                c + radius * math.cos(2 * math.pi * i / n - math.pi / 2),
                c + radius * math.sin(2 * math.pi * i / n - math.pi / 2),
            )
            for i in range(n)
        ]

    pos = dict(zip((m["id"] for m in nodes), ring(len(nodes), c - 170), strict=True))
    tpos = dict(zip(tags, ring(len(tags), c / 3), strict=True)) if tags else {}
    parts = [
        f'<svg class="graph" viewBox="0 0 {SIZE} {SIZE}" role="group" aria-labelledby="graph-title">'
        f'<title id="graph-title">Memories and their relations ({len(nodes)} memories, {len(tags)} shared tags)</title>'
    ]
    for m in nodes:
        x, y = pos[m["id"]]
        for t in m["tags"]:
            if t in tpos:
                tx, ty = tpos[t]
                parts.append(f'<line class="tagged" x1="{x:.1f}" y1="{y:.1f}" x2="{tx:.1f}" y2="{ty:.1f}"/>')
    for e in edges:
        if e.from_id in ids and e.to_id in ids and e.from_id != e.to_id:
            (x1, y1), (x2, y2) = pos[e.from_id], pos[e.to_id]
            parts.append(
                f'<line class="rel" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}">'
                f"<title>{esc(e.type)}</title></line>"
            )
    for t, (x, y) in tpos.items():
        parts.append(
            f'<g class="tagnode"><rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8"/>'
            f'<text x="{x:.1f}" y="{y - 9:.1f}" text-anchor="middle">#{esc(_label(t))}</text></g>'
        )
    for m in nodes:
        x, y = pos[m["id"]]
        anchor = "start" if x >= c + 1 else ("end" if x <= c - 1 else "middle")
        dx = 10 if anchor == "start" else (-10 if anchor == "end" else 0)
        dy = 4 if anchor != "middle" else (-12 if y < c else 20)
        parts.append(
            f'<a href="#m-{esc(m["id"])}" class="node"><title>{esc(m["content"][:200])}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7"/>'
            f'<text x="{x + dx:.1f}" y="{y + dy:.1f}" text-anchor="{anchor}">{esc(_label(m["content"]))}</text></a>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _relations(m: Mapping[str, Any], out_edges: Sequence[Mapping[str, Any]], names: Mapping[str, str]) -> str:
    if not out_edges:
        return ""
    items = []
    for e in out_edges:
        other = e["to_hash"] if e["from_hash"] == m["id"] else e["from_hash"]
        arrow = "→" if e["from_hash"] == m["id"] else "←"
        items.append(
            f'<li>{arrow} <span class="reltype">{esc(e["relation_type"])}</span> '
            f'<a href="#m-{esc(other)}">{esc(_label(names.get(other, other[:12])))}</a></li>'
        )
    return '<ul class="relations">' + "".join(items) + "</ul>"


def view(
    memories: Sequence[Mapping[str, Any]],
    edges: Sequence[Edge],
    relationships: Mapping[str, Sequence[Mapping[str, Any]]],
    total: int,
    csrf: str,
) -> str:
    """``memories``: memory answers, newest first; ``edges``: every relation among them; ``relationships``:
    memory id -> its relationship answers (both directions); ``total``: memories on the board."""
    out = ["<h1>Memories</h1>"]
    if not memories:
        return out[0] + (
            "<p class=empty>No memories yet. Agents store them with <code>store_memory</code> or "
            "<code>memo_add</code>.</p>"
        )
    more = f" (the newest {len(memories)} shown)" if total > len(memories) else ""
    out.append(f"<p class=meta>{total} memories{more}.</p>")
    svg = graph_svg(memories, edges)
    if svg:
        out.append(
            f'<figure class="graphbox">{svg}<figcaption>Relations (lines) and shared tags (squares).</figcaption></figure>'
        )
    names = {m["id"]: m["content"] for m in memories}
    out.append('<ol class="memories">')
    for m in memories:
        tags = "".join(f'<span class="tag">{esc(t)}</span>' for t in m["tags"])
        project = f" · {esc(m['project'])}" if m["project"] else ""
        out.append(
            f'<li class="memory" id="m-{esc(m["id"])}"><p class="content">{esc(m["content"])}</p>'
            f"<p class=meta>{esc(m['memory_type'])} · importance {m['importance']}{project} · "
            f"{esc(age(m['created_at']) or m['created_at'])} {tags}</p>"
            f"{_relations(m, relationships.get(m['id'], ()), names)}"
            f"{delete_form(url('memories', m['id'], 'delete'), csrf, 'this memory', '/memories')}</li>"
        )
    out.append("</ol>")
    return "".join(out)
