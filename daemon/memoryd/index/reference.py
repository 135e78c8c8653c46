"""Reference passages: what the meaning half compares a query against when the index is too small.

Search scales each cosine against the query's own candidates (:mod:`memoryd.index.search`): the mean and
spread of its 25 nearest records per script group. With 1, 3 or 10 records those statistics say nothing (the
z-score of a lone value, the spread of three), so a lone unrelated record stood out as much as a related one.
And e5 cosines sit in a narrow band whose level depends on the query (unrelated pairs 0.77–0.82, related
~0.86: ``shared/model/README.md``), so no fixed cosine tells related from unrelated either.

The reference is a fixed set of short passages written for memoryd (``reference_passages.txt``: developer
notes, everyday chat and general facts in English, Hinglish, a few European languages, Japanese, Chinese
and Korean; no evaluation data). They are embedded once per model, when the model loads (~0.7 s for the
~140 passages on 2 cores), and per query cost one 140 x 384 product. They serve two purposes:

* stand-ins: a script group with fewer than 25 records fills its statistics with the reference passages
  closest to the query, as a large index fills them with its own unrelated records; from 25 records on the
  index's own statistics are used unchanged;
* lift: a record's cosine minus the query's mean cosine to the reference passages of the record's script,
  a measure of "closer than unrelated text" that does not depend on the index's size.
"""

from __future__ import annotations

import threading
import weakref
from importlib import resources

import numpy as np

from memoryd.index.records import script_group

FILE = "reference_passages.txt"

_lock = threading.Lock()
_vectors: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def passages() -> list[str]:
    """The reference passages, one a line (``#`` lines are comments)."""
    text = resources.files("memoryd.index").joinpath(FILE).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def vectors(embedder) -> dict[str, np.ndarray]:
    """``{script group: float32 (n, dim)}``: the passages embedded by ``embedder`` (once per embedder, then
    cached; thread-safe). They are not stored text, so ``embedder.passages_embedded`` does not count them."""
    got = _vectors.get(embedder)
    if got is None:
        with _lock:
            got = _vectors.get(embedder)
            if got is None:
                lines = passages()
                vecs = embedder.embed_passages(lines, count=False)
                groups = np.array([script_group(line) for line in lines])
                got = {g: np.ascontiguousarray(vecs[groups == g]) for g in sorted(set(groups))}
                _vectors[embedder] = got
    return got


def cosines(embedder, qvec: np.ndarray) -> dict[str, np.ndarray]:
    """``{script group: cosines of the query vector to that group's passages, best first}`` (float64)."""
    return {g: np.sort(v @ qvec).astype(np.float64)[::-1] for g, v in vectors(embedder).items()}
