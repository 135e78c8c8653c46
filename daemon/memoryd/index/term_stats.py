"""Keyword term statistics: document frequencies and column lengths, for BM25's IDF and average lengths.

LanceDB computes BM25 but does not expose IDF, and search needs it to tell a match on rare query terms from
an accidental match on common ones. A saved copy (JSON, beside the table) is keyed by the table's version
and row count; a stale or unreadable copy is ignored (logged) and the caller counts from the table.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path

from memoryd.logs import get_logger

log = get_logger("memoryd.index.term_stats")

STATS_FORMAT = 2  # 2: with the token lengths of the two columns


class TermStats:
    """``df``: term -> number of records holding it (in either keyword column); ``docs``: records;
    ``lengths``: terms in each of the two keyword columns over every record (BM25's average lengths)."""

    def __init__(self) -> None:
        self.df: Counter[str] = Counter()
        self.docs = 0
        self.lengths = [0, 0]

    def add(self, text_main: str, text_aux: str, sign: int = 1) -> None:
        """Count (``sign`` 1) or uncount (-1) one record's two term strings."""
        main, aux = text_main.split(), text_aux.split()
        self.lengths[0] += sign * len(main)
        self.lengths[1] += sign * len(aux)
        terms = set(main)
        terms.update(aux)
        if sign > 0:
            self.df.update(terms)  # an iterable takes Counter's C loop; a mapping a Python one
        else:
            self.df.subtract(terms)
        self.docs += sign

    def idf(self, term: str) -> float:
        """BM25's IDF (Robertson–Spärck Jones, with Lucene's +1 to stay positive)."""
        n = self.df.get(term, 0)
        return math.log(1.0 + (self.docs - n + 0.5) / (n + 0.5))

    # -- the saved copy --------------------------------------------------------------------------
    def save(self, path: Path, version: int, rows: int) -> None:
        """Write the counts for table ``version`` holding ``rows`` rows (temp file + rename)."""
        live = [(t, n) for t, n in self.df.items() if n > 0]
        doc = {
            "format": STATS_FORMAT,
            "version": version,
            "rows": rows,
            "docs": self.docs,
            "lengths": self.lengths,
            "terms": "\n".join(t for t, _ in live),  # terms never hold whitespace
            "counts": [n for _, n in live],
        }
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, version: int, rows: int) -> TermStats | None:
        """The saved counts if they were saved for exactly this table ``version`` and ``rows``, else None
        (absent, stale or unreadable: the caller counts from the table)."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if (doc["format"], doc["version"], doc["rows"], doc["docs"]) != (
                STATS_FORMAT,
                version,
                rows,
                rows,
            ):
                return None
            terms = doc["terms"].split("\n") if doc["terms"] else []
            if len(terms) != len(doc["counts"]):
                return None
            stats = cls()
            stats.df = Counter(dict(zip(terms, doc["counts"], strict=True)))
            stats.docs = doc["docs"]
            stats.lengths = [int(n) for n in doc["lengths"]][:2]
            return stats
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("termstats_unreadable", path=str(path), error=str(exc))
            return None
