"""Which line of a hit holds the words a person searched for, when it is not the line ``memoryd search``
already shows: a brief found through a line appended to its ``said.txt``, or an imported entity found
through one of its observations, shows that line too (a short snippet), not only its first line.

Words are compared as the keyword index compares them (:func:`memoryd.index.terms.term_string`), with
plural and verb endings cut (:func:`stems`), so "retried" in the query finds "retries" in the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.errors import MemorydError

#: How much of a matching line is shown (characters; a longer line is cut with "…").
SNIPPET_CHARS = 160


def stems(terms: str) -> set[str]:
    """``terms`` with a plural or verb ending cut ("retries" and "retried" -> "retri"), so a word asked in
    another form still counts as found, as LanceDB's stemmer finds it."""
    out = set()
    for term in terms.split():
        for end in ("ing", "ies", "ied", "es", "ed", "s"):
            if term.endswith(end) and len(term) - len(end) >= 3:
                term = term[: -len(end)] + ("i" if end in ("ies", "ied") else "")
                break
        out.add(term)
    return out


def cut(line: str, limit: int = SNIPPET_CHARS) -> str:
    """``line`` stripped, cut to ``limit`` characters with "…" when longer."""
    line = line.strip()
    return line if len(line) <= limit else line[:limit].rstrip() + "…"


def best_line(text: str, query: str, shown: str) -> str | None:
    """The line of ``text`` holding the most of ``query``'s words that ``shown`` (what is printed already)
    lacks, cut to :data:`SNIPPET_CHARS`; ``None`` when ``shown`` holds them all, or no other line holds
    any. The first of equally good lines wins (the text's order)."""
    from memoryd.index.terms import term_string

    missing = stems(term_string(query, query=True)) - stems(term_string(shown))
    if not missing:
        return None
    # a shown line may be cut ("…"): a line it begins is shown already
    shown_lines = [s.strip().removesuffix("…").rstrip() for s in shown.splitlines() if s.strip()]
    best, score = None, 0
    for line in text.splitlines():
        if not line.strip() or any(line.strip().startswith(s) for s in shown_lines):
            continue
        found = len(missing & stems(term_string(line)))
        if found > score:
            best, score = line, found
    return cut(best) if best is not None else None


def add_snippets(answer: dict[str, Any], query: str) -> None:
    """Give each brief hit and memory whose best-matching line is not the one shown a ``"snippet"``: that
    line (:func:`memoryd.cli.matchline.best_line`). A brief's lines are read from the board that answered
    (``said.txt``, redacted as answers are); a memory's from its content in the answer."""
    results = answer.get("results") or ()
    reader = None
    if results and answer.get("board"):
        from memoryd.kinds.briefs.reader import BoardReader

        reader = BoardReader(Path(answer["board"]))
    for r in results:
        try:
            brief = reader.read_brief(r["brief_id"]) if reader is not None else None
        except (OSError, ValueError, MemorydError):  # the board: unreadable here, or a bad id
            break
        line = best_line(brief.said, query, f"{r['title']}\n{r['said']}") if brief is not None else None
        if line:
            from memoryd.index.redact import redact

            r["snippet"] = redact(line).text
    for m in answer.get("memories") or ():
        content = str(m.get("content", ""))
        lines = [line for line in content.splitlines() if line.strip()]
        line = best_line(content, query, first_line(lines)) if len(lines) > 1 else None
        if line:
            m["snippet"] = line


def first_line(lines: list[str]) -> str:
    """The line a memory is shown by: its first, cut to :data:`SNIPPET_CHARS` with "…" when cut or
    followed by more lines."""
    first = lines[0].strip() if lines else ""
    if len(first) > SNIPPET_CHARS or len(lines) > 1:
        first = first[:SNIPPET_CHARS].rstrip() + "…"
    return first
