"""Derivation cache: skip re-deriving records whose board inputs did not change (no-change restarts).

Deriving a record (redaction, keyword terms) costs ~1.8 ms per brief, so a restart that re-derives
10,000 briefs just to learn that nothing changed takes ~18 s. The cache remembers, per record id, a hash
of the *inputs* the record was derived from (:func:`source_hash`) and the content hash of the record
that came out. When the inputs hash the same and the index still holds that content hash, the record is
unchanged and is not derived again.

It is a cache of a cache: ``derive-cache.json`` beside the LanceDB table in the index folder, written
atomically after a reconcile; a missing, unreadable or foreign file means "derive everything" (never an
error). Entries are keyed by :data:`DERIVE_VERSION` and the package version, so a release that changes
redaction or term rules re-derives once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd.logs import get_logger

log = get_logger("memoryd.index.derive_cache")

#: Bump when the derivation of records from the same inputs changes without a package version change.
DERIVE_VERSION = 4  # 3: redaction takes whole tokens, more vendor formats and stated passwords; 4: katakana words bigrammed on their own
FILE_NAME = "derive-cache.json"


def _stamp() -> str:
    from memoryd.index.records import RECORD_FORMAT

    return f"{DERIVE_VERSION}/{RECORD_FORMAT}/{__version__}"


def source_hash(*inputs: Any) -> str:
    """SHA-256 hex over the inputs a record is derived from.

    Inputs are the board's frozen dataclasses (``Brief``, ``Task``...) whose fields are strings, numbers,
    None, tuples and nested such dataclasses: their ``repr`` is deterministic and 3-4x cheaper than
    converting them to JSON (~30 us a brief). Never pass sets or objects with identity-based reprs.
    """
    return hashlib.sha256(repr(inputs).encode("utf-8", "surrogatepass")).hexdigest()


class DeriveCache:
    """``id -> (source_hash, content_hash)``, loaded from and saved to ``<index>/derive-cache.json``.

    Not thread-safe: only the index writer uses it.
    """

    def __init__(self, index_dir: Path) -> None:
        self.path = Path(index_dir) / FILE_NAME
        self._entries: dict[str, tuple[str, str]] = {}
        self._dirty = False
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("derive_cache_unreadable", path=str(self.path), error=str(exc))
            return
        if not isinstance(data, dict) or data.get("stamp") != _stamp():
            return  # another release or format: derive everything once
        entries = data.get("entries")
        if isinstance(entries, dict):
            self._entries = {
                k: (v[0], v[1])
                for k, v in entries.items()
                if isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
            }

    def __len__(self) -> int:
        return len(self._entries)

    def unchanged(self, record_id: str, src_hash: str, stored_content_hash: str | None) -> bool:
        """True when ``record_id`` was derived from inputs hashing to ``src_hash`` and the index still
        holds the record that derivation produced (``stored_content_hash``)."""
        entry = self._entries.get(record_id)
        return (
            entry is not None and stored_content_hash is not None and entry == (src_hash, stored_content_hash)
        )

    def put(self, record_id: str, src_hash: str, content_hash: str) -> None:
        if self._entries.get(record_id) != (src_hash, content_hash):
            self._entries[record_id] = (src_hash, content_hash)
            self._dirty = True

    def keep_only(self, ids: Iterable[str]) -> None:
        """Forget every entry not in ``ids`` (records gone from the board)."""
        keep = set(ids)
        gone = [k for k in self._entries if k not in keep]
        for k in gone:
            del self._entries[k]
        self._dirty |= bool(gone)

    def drop(self, ids: Iterable[str]) -> None:
        for k in ids:
            if self._entries.pop(k, None) is not None:
                self._dirty = True

    def save(self) -> None:
        """Write the cache atomically (temp file + rename); failures are logged, never raised."""
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".derive-cache.", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"stamp": _stamp(), "entries": self._entries}, f, separators=(",", ":"))
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError as exc:
            log.warning("derive_cache_not_saved", path=str(self.path), error=str(exc))
