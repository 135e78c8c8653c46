"""A record's own keyword evidence, apart from the words it carries from its group.

A brief's main text holds its task's title, so that a query naming the task finds its briefs. A brief that
says nothing of the query itself then matches through its task alone, and a short one scores high (BM25
favours short texts) with a meaning close to the title's: "add a regression test for the redirect loop",
filed under "Fix the login redirect", came first for "login" above briefs that say "login". The record's
main terms are therefore its own, then :data:`~memoryd.index.terms.GROUP_MARK`, then its group's
(:func:`main_terms`); search tells which candidates match only through their group (:func:`inherited`)
from what each record's write left in memory (:class:`Signatures`), and ranks those below the records
that match on their own. Reading the texts back for every search cost ~5 ms at 10,000 briefs.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.index.terms import GROUP_MARK

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


#: Bump when what a saved signature means changes (its terms, its bits): saved ones are then ignored.
SIGNATURES_FORMAT = 1
#: Bits of a record's signature of its own terms (a Bloom filter, two bits per term): ~3 % false "own"
#: for a brief of 100 distinct terms, which only leaves that brief where it ranked before.
_SIG_BITS = 1024


class Signatures:
    """What :func:`inherited` needs of each record with a group's terms, held in memory: its group's terms
    and a signature of its own, both as the text index stems them. The store notes each record it writes
    from the tokens it makes for its keyword tail anyway; a record an earlier process wrote is read from
    the table the first time a search asks (one read of ~3-9 ms at 10,000-100,000 rows, and their texts
    through the tokenizer). Saved beside the table when it is compacted and when the writer closes, so a
    restarted daemon starts with them. Thread-safe for one writer and many readers (single dict
    operations)."""

    def __init__(self) -> None:
        # id -> (group's terms, own signature), or None: the record has no group's terms
        self._by_id: dict[str, tuple[frozenset[str], int] | None] = {}
        self._groups: dict[frozenset[str], frozenset[str]] = {}  # one set per title, shared by its briefs

    def save(self, path: Path, hashes: dict[str, str]) -> None:
        """Write every entry whose record is in ``hashes`` (id -> its content hash, kept beside the entry so
        a record changed since does not take it back) to ``path`` (temp file + rename). Raises OSError."""
        doc = {
            "format": SIGNATURES_FORMAT,
            "records": {
                i: [hashes[i], *([sorted(e[0]), format(e[1], "x")] if e else [])]
                for i, e in list(self._by_id.items())
                if i in hashes
            },
        }
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, hashes: dict[str, str]) -> Signatures:
        """The entries saved at ``path`` whose record still has the content hash it had then (``hashes``: id
        -> content hash now); empty when the file is absent or unreadable (searches read what they need)."""
        sigs = cls()
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("format") != SIGNATURES_FORMAT:
                return sigs
            for i, entry in doc["records"].items():
                if hashes.get(i) != entry[0]:
                    continue
                if len(entry) == 1:
                    sigs._by_id[i] = None
                else:
                    group = frozenset(entry[1])
                    sigs._by_id[i] = (sigs._groups.setdefault(group, group), int(entry[2], 16))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            sigs = cls()
        return sigs

    def note(self, rid: str, main: Iterable[str], aux: Iterable[str], mark: str) -> None:
        """Record ``rid`` from its main and aux tokens (the group's after ``mark``, as tokenised)."""
        main = list(main)
        if mark not in main:
            self._by_id[rid] = None
            return
        at = main.index(mark)
        group = frozenset(main[at + 1 :])
        self._by_id[rid] = (self._groups.setdefault(group, group), _signature([*main[:at], *aux]))

    def forget(self, ids: Iterable[str]) -> None:
        for i in ids:
            self._by_id.pop(i, None)

    def missing(self, ids: Iterable[str]) -> list[str]:
        return [i for i in ids if i not in self._by_id]

    def inherited(self, rid: str, wanted: set[str]) -> bool:
        entry = self._by_id.get(rid)
        return entry is not None and bool(wanted & entry[0]) and not _maybe_any(entry[1], wanted)


def _bits(term: str) -> int:
    h = zlib.crc32(term.encode())  # not hash(): the signatures are saved, and str hashes vary by process
    return (1 << (h % _SIG_BITS)) | (1 << ((h // _SIG_BITS) % _SIG_BITS))


def _signature(terms: Iterable[str]) -> int:
    sig = 0
    for t in set(terms):
        sig |= _bits(t)
    return sig


def _maybe_any(sig: int, terms: Iterable[str]) -> bool:
    return any(sig & b == b for b in map(_bits, terms))


def inherited(store: IndexStore, query_terms: str, ids: Iterable[str]) -> set[str]:
    """The ``ids`` that match some of ``query_terms`` (our terms) in their group's terms but none in their
    own, compared as the text index stems them ("logins" is "login"); ``set()`` when none has a group's
    terms. At most one tokenizer call (query terms seen before are not sent); the keyword texts of records
    no write of this process noted are read from the table once (:class:`Signatures`)."""
    ids = list(ids)
    asked = set(query_terms.split())
    if not ids or not asked:
        return set()
    sigs = store.signatures
    missing = sigs.missing(ids)
    rows = store.rows(missing, ("id", "text_main", "text_aux")) if missing else {}
    stem = {t: _STEMS[t] for t in (*asked, GROUP_MARK) if t in _STEMS}
    unseen = [t for t in (*asked, GROUP_MARK) if t not in stem]
    texts = unseen + [text for row in rows.values() for text in (row["text_main"], row["text_aux"])]
    stemmed = (store.stems(texts) if texts else []) or texts  # None before the text indexes exist: as written
    stem.update(zip(unseen, stemmed, strict=False))
    if unseen and stemmed is not texts:  # the text index's own tokenizer: the same for the process's life
        if len(_STEMS) > _STEMS_KEPT:
            _STEMS.clear()
        _STEMS.update(zip(unseen, stemmed, strict=False))
    wanted = {w for t in asked for w in stem[t].split()}
    for n, i in enumerate(rows):
        at = len(unseen) + 2 * n
        sigs.note(i, stemmed[at].split(), stemmed[at + 1].split(), stem[GROUP_MARK])
    return {i for i in ids if sigs.inherited(i, wanted)}


# a query term's stem, kept: most searches then make no tokenizer call (~0.6-1.4 ms each)
_STEMS: dict[str, str] = {}
_STEMS_KEPT = 20_000


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
