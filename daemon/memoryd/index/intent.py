"""Cheap query intents that the words alone don't carry: "still open?" and "the one in August".

Both are priors added to the hybrid score, never filters: a wrong guess costs a little rank, not the
answer. One exception: a query that asks *only* what is open ("what's still open?", no subject of its own)
has no words to match; :func:`open_listing` tells the search to list the open work instead.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from memoryd.index.terms import terms

_OPEN = re.compile(
    r"\b(still|open|unresolved|pending|outstanding|remaining|left|todo|to-do|unfinished|not yet|yet|"
    r"baaki|baki|abhi tak|pending hai)\b|未解決|残って|まだ|未対応|対応中",
    re.IGNORECASE,
)
_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH_WORD = re.compile(r"\b(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_JA_MONTH = re.compile(r"(1[0-2]|[1-9])\s*月")
_RELATIVE = re.compile(
    r"\b(last|this|pichhle|pichle|is)\s+(week|month|hafte|mahine)\b|先月|今月|先週|今週", re.IGNORECASE
)


def asks_open(query: str) -> bool:
    """True when the query asks what is still open / unresolved (English, Hinglish, Japanese)."""
    return bool(_OPEN.search(query))


# fmt: off
#: Words a question about open work uses without naming what it is about (beside the filler words the
#: query terms drop and the words of :data:`_OPEN`): "what's left to do?", "show me the open tasks".
_STATUS_WORDS = frozenset([
    "s", "open", "opened", "unresolved", "pending", "outstanding", "remaining", "remain", "remains", "left",
    "todo", "todos", "to-do", "unfinished", "undone", "incomplete", "unsolved", "ongoing", "active", "current",
    "currently", "progress", "in-progress", "right", "working", "work", "task", "tasks", "item", "items",
    "issue", "issues", "ticket", "tickets", "list", "show", "tell", "need", "needs", "needed", "finish",
    "finished", "complete", "completed", "closed", "happening", "kaam", "bacha", "bache", "bachi", "tak",
])
# fmt: on
_JA_STATUS_WORDS = re.compile(r"タスク|課題|作業|仕事|もの|こと|何|なに|どれ|一覧|件|未完了|進行中|終わって")
_KANA = re.compile(r"^[\u3040-\u309f\u30fc]+$")  # hiragana alone: particles and endings, never a subject


def subject_terms(query: str) -> set[str]:
    """The query's keyword terms that say what it is about: every term but filler, status words ("still",
    "open", "left", "tasks", ...) and, in Japanese, particles."""
    text = _JA_STATUS_WORDS.sub(" ", _OPEN.sub(" ", query))
    return {t for t in terms(text, query=True) if t not in _STATUS_WORDS and not _KANA.match(t)}


def open_listing(query: str, known: set[str]) -> str | None:
    """When ``query`` asks only what is still open, with no subject words (:func:`subject_terms`): ``""``,
    or the one project of ``known`` it names in full ("what's still open in payments-api?"); None when it
    asks something else, or about a subject ("is the refund bug still open?")."""
    if not asks_open(query):
        return None
    rest = subject_terms(query)
    if not rest:
        return ""
    named = [p for p in known if rest <= _name_terms(p)]
    return named[0] if len(named) == 1 else None


def _name_terms(project: str) -> set[str]:
    """The terms a query may spell ``project`` with: whole, its parts, its parts joined."""
    parts = [p for p in re.split(r"[-_. ]+", project.lower()) if p]
    return {project.lower(), "".join(parts), *parts, *terms(project, query=True)}


def _month_key(year: int, month: int) -> str:
    return f"{year:04d}-{month:02d}"


def months(query: str, as_of: datetime) -> set[str]:
    """``YYYY-MM`` keys the query points at: month names (the latest such month not after ``as_of``),
    Japanese ``8月``, and "last/this week|month" relative to ``as_of``."""
    found: set[str] = set()
    nums = [_MONTHS[m.group(1).lower()] for m in _MONTH_WORD.finditer(query)]
    # "may" is also a verb: only trust it next to a date-ish word
    if "may" in {m.group(1).lower() for m in _MONTH_WORD.finditer(query)} and not re.search(
        r"\b(in|since|from|during|early|late|mid)\s+may\b", query, re.IGNORECASE
    ):
        nums = [n for n in nums if n != 5]
    nums += [int(m.group(1)) for m in _JA_MONTH.finditer(query)]
    for n in nums:
        year = as_of.year if n <= as_of.month else as_of.year - 1
        found.add(_month_key(year, n))
    for m in _RELATIVE.finditer(query):
        word = m.group(0).lower()
        if "week" in word or "hafte" in word or "週" in word:
            last = word.startswith(("last", "pichh")) or "先" in word
            start = as_of - timedelta(days=14 if last else 7)
            for d in (start, as_of):
                found.add(_month_key(d.year, d.month))
        else:
            last = word.startswith(("last", "pichh")) or "先" in word
            d = (as_of.replace(day=1) - timedelta(days=1)) if last else as_of
            found.add(_month_key(d.year, d.month))
    return found


def projects(query_terms: set[str], known: set[str]) -> dict[str, float]:
    """Projects the query names: ``{project: 1.0}`` for the full name ("payments-api", "payments api",
    "paymentsapi"), ``0.5`` when only a distinctive part of it (≥ 4 letters, e.g. "docs" for
    "docs-site") occurs. ``query_terms`` are :func:`memoryd.index.terms.terms` of the query."""
    out: dict[str, float] = {}
    for name in known:
        parts = [p for p in re.split(r"[-_. ]+", name.lower()) if p]
        if (
            name.lower() in query_terms
            or "".join(parts) in query_terms
            or (len(parts) > 1 and all(p in query_terms for p in parts))
        ):
            out[name] = 1.0
        elif any(len(p) >= 4 and p in query_terms for p in parts):
            out[name] = 0.5
    return out


# a word that reads as a code, not as language (ASCII only): letters with digits (E4012, S3UploadFailedError),
# an underscore (ERR_SSL_PROTOCOL_ERROR), a camelCase hump (parseApiDate), hex (0x80070005), 3+ digits
_CODE = re.compile(
    r"(?=[A-Za-z0-9]*[A-Za-z])(?=[A-Za-z0-9]*\d)[A-Za-z0-9]+|[A-Za-z0-9]*_[A-Za-z0-9_]*"
    r"|[A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*|0[xX][0-9a-fA-F]+|\d{3,}"
)
_EDGES = "\"'`()[]{}<>:;,.!?-"


def codes(query: str) -> list[str]:
    """The whole terms of ``query``'s words when every word is an error code or identifier (``_CODE``),
    in order; ``[]`` otherwise ("E4012" -> ``["e4012"]``; "ERR_SSL_PROTOCOL_ERROR" ->
    ``["err_ssl_protocol_error"]``; "E4012 at checkout" -> ``[]``). The embedding model reads no meaning
    into such a query: the search weighs who holds the code itself."""
    words = [w.strip(_EDGES) for w in query.split()]
    if not words or not all(_CODE.fullmatch(w) for w in words):
        return []
    out = []
    for word in words:
        found = terms(word, query=True)
        if found:
            out.append(found[0])  # a split identifier's whole form comes first
    return out
