"""A record's own keyword evidence, apart from the words it carries from its group.

A brief's main text holds its task's title, so that a query naming the task finds its briefs. A brief that
says nothing of the query itself then matches through its task alone, and a short one scores high (BM25
favours short texts) with a meaning close to the title's: "add a regression test for the redirect loop",
filed under "Fix the login redirect", came first for "login" above briefs that say "login". The record's
main terms are therefore its own, then :data:`~memoryd.index.keyword.GROUP_MARK`, then its group's
(:func:`main_terms`); search reads them back to tell which candidates match only through their group
(:func:`inherited`), and ranks those below the records that match on their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from memoryd.index.keyword import GROUP_MARK

if TYPE_CHECKING:  # records import this module, and the store imports records
    from memoryd.index.store import IndexStore


def main_terms(own: str, group: str) -> str:
    """A record's ``text_main``: its own terms, then (when ``group`` has any) the mark and its group's."""
    return f"{own} {GROUP_MARK} {group}" if group.strip() else own


def split(text_main: str) -> tuple[str, str]:
    """``text_main`` as ``(own terms, group terms)``; ``group`` is ``""`` for a record without a group's."""
    own, mark, group = text_main.partition(f" {GROUP_MARK} ")
    return (own, group) if mark else (text_main, "")


def own_text(row: dict) -> str:
    """The terms of a row (``text_main``, ``text_aux``) that are its own, space-joined."""
    return f"{split(row.get('text_main') or '')[0]} {row.get('text_aux') or ''}"


def inherited(store: IndexStore, query_terms: str, ids: Iterable[str]) -> set[str]:
    """The ``ids`` that match some of ``query_terms`` (our terms) in their group's terms but none in their
    own, compared as the text index stems them ("logins" is "login"); ``set()`` when none has a group's
    terms. Reads the keyword texts of ``ids`` from the table (one read, one tokenizer call at most)."""
    ids = list(ids)
    asked = set(query_terms.split())
    if not ids or not asked:
        return set()
    rows = store.rows(ids, ("id", "text_main", "text_aux"))
    undecided: dict[str, tuple[str, str]] = {}
    for i, row in rows.items():
        own, group = split(row["text_main"])
        if group:
            own = f"{own} {row['text_aux']}"
            if not asked & set(own.split()):  # as written: the usual case, no tokenizer call
                undecided[i] = (own, group)
    if not undecided:
        return set()
    texts = [" ".join(asked)] + [t for pair in undecided.values() for t in pair]
    stemmed = store.stems(texts) or texts  # None before the text indexes exist: compare as written
    wanted = set(stemmed[0].split())
    out = set()
    for n, i in enumerate(undecided):
        own, group = stemmed[1 + 2 * n].split(), stemmed[2 + 2 * n].split()
        if not wanted.intersection(own) and wanted.intersection(group):
            out.add(i)
    return out


def below_own(
    scored: list[tuple[str, dict, float]], inherited: set[str], matched: set[str]
) -> list[tuple[str, dict, float]]:
    """``scored`` with the ``inherited`` entries that score at least the lowest of the keyword ``matched``
    ones matching on their own moved just below it, in their order (each score stays above 0)."""
    own = [s for i, _, s in scored if i in matched and i not in inherited]
    if not own:
        return scored
    floor = min(own)
    above = sorted((-s, i) for i, _, s in scored if i in inherited and s >= floor)
    moved = {i: floor * (1 - 1e-3 * (k + 1) / (len(above) + 1)) for k, (_, i) in enumerate(above)}
    return [(i, row, moved.get(i, s)) for i, row, s in scored]
