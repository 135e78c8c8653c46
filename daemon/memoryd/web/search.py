"""The search view: the agents' searches (``search_briefs``, ``search_memories``) with why each result matched.

Briefs: :func:`memoryd.kinds.briefs.render.search_answer` over the same search call as ``search_briefs``
(kind ``brief``, the same pool); memories: :meth:`memoryd.kinds.memories.api.Memories.search` as
``search_memories`` calls it, answered through :func:`memoryd.kinds.memories.render.memory`. Both asked with
``reasons=True``: each hit carries the query's words found in it, its keyword and meaning parts, and the
boosts that applied (freshness among them); the page shows those next to the record's age.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.web.html import age, esc, url
from memoryd.wording import NO_PROJECT

#: Results shown per kind.
SHOWN = 20


def _why(why: Any, date: str, hybrid: bool) -> str:
    """One line: words, meaning (``hybrid`` only), keyword, boosts, age. ``why``: a search ``Why`` or the
    memories' dict."""
    if why is None:
        return ""
    get = why.get if isinstance(why, Mapping) else lambda k: getattr(why, k)
    words = get("words") or ()
    parts = []
    if words:
        parts.append("words: " + ", ".join(f"<mark>{esc(w)}</mark>" for w in words))
    else:
        parts.append("no query word in it")
    if hybrid:
        parts.append(f"meaning {get('meaning'):.2f}")
    parts.append(f"keyword {get('keyword'):.2f}")
    parts += [f"{esc(name)} +{amount:.2f}" for name, amount in get("boosts") or ()]
    when = age(date)
    if when:
        parts.append(f"freshness: {esc(when)}")
    return '<p class="why">' + " · ".join(parts) + "</p>"


def view(
    query: str,
    briefs: Mapping[str, Any] | None,
    brief_hits: Sequence[Any],
    memories: Sequence[tuple[Mapping[str, Any], float, Any]],
    memories_mode: str = "",
) -> str:
    """``briefs``: ``search_briefs``'s answer; ``brief_hits``: the hits it was built from (same order, with
    ``why``); ``memories``: ``(memory answer, relevance, why)`` best first."""
    if not query.strip():
        return (
            "<h1>Search</h1><p>Type what you remember, in any words or language — the same search your agents "
            "run (<code>search_briefs</code>, <code>search_memories</code>).</p>"
        )
    out = [f"<h1>Search: {esc(query)}</h1>"]
    if briefs is not None:
        mode = f" · {esc(briefs['mode_note'])}" if briefs.get("mode_note") else ""
        out.append(
            f'<section aria-labelledby="r-briefs"><h2 id="r-briefs">Briefs '
            f"<span class=meta>{briefs['shown']} of {briefs['matched']}{'+' if briefs['matched_at_least'] else ''} · "
            f"{esc(briefs['mode'])}{mode}</span></h2>"
        )
        if not briefs["results"]:
            out.append("<p class=empty>No brief matches.</p>")
        out.append('<ol class="results">')
        for r, hit in zip(briefs["results"], brief_hits, strict=False):
            link = url("task", r["task_id"]) + "#" + r["brief_id"]
            out.append(
                f'<li class="result" data-task="{esc(r["task_id"])}"><a href="{esc(link)}">{esc(r["title"])}</a> '
                f"<span class=meta>{esc(r['project'] or NO_PROJECT)} · {esc(r['task_status'])} · {esc(r['date'])} · "
                f"score {r['score']:.2f}</span>"
                f'<p class="said">{esc(r["said"])}</p>{_why(hit.why, hit.date, briefs["mode"] == "hybrid")}</li>'
            )
        out.append("</ol></section>")
    out.append(
        f'<section aria-labelledby="r-mem"><h2 id="r-mem">Memories <span class=meta>{len(memories)}'
        f"{' · ' + esc(memories_mode) if memories_mode else ''}</span></h2>"
    )
    if not memories:
        out.append("<p class=empty>No memory matches.</p>")
    out.append('<ol class="results">')
    for m, relevance, why in memories:
        tags = "".join(f'<span class="tag">{esc(t)}</span>' for t in m["tags"])
        out.append(
            f'<li class="result"><a href="/memories#m-{esc(m["id"])}">{esc(m["content"][:200])}</a> '
            # importance and recency lift a strong match a little above 1: shown on the 0-1 scale
            f"<span class=meta>{esc(m['memory_type'])} · relevance {min(1.0, relevance):.2f}</span> {tags}"
            f"{_why(why, m['created_at'], memories_mode == 'hybrid')}</li>"
        )
    out.append("</ol></section>")
    return "".join(out)
