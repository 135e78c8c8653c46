"""The keyword (BM25) half of the index: what a term is, LanceDB's full-text indexes, the in-memory tail
of newer rows, and the term statistics both are scored with.

Over 400 lines: the terms written, the terms asked for, LanceDB's tokens of both, the tail's scores and the
statistics must agree with each other, so they are kept together.

*Terms.* Documents and queries go through the same :func:`terms` so the LanceDB full-text index can use a
plain whitespace tokenizer: we decide what a term is, LanceDB only counts them. Rules:

* NFKC + lower case; URLs and paths split on punctuation like any other text;
* identifiers are kept whole *and* split (``refresh_token_reused`` -> ``refresh_token_reused refresh
  token reused``; ``readSession`` -> ``readsession read session``), the standard trick for code
  search (CoSQA needs it);
* runs of CJK characters (Han, Hiragana, Katakana, Hangul) become overlapping character bigrams, the
  usual dictionary-free CJK indexing (e.g. Lucene's CJKBigramFilter), since Japanese has no spaces;
  a katakana word is bigrammed on its own (no bigram joins it to the text around it), and a query drops
  a lone hiragana particle between two such words; a katakana run made of known loanwords also yields
  their English words (:mod:`memoryd.index.loanwords`: ログインボタン -> login button);
* an emoji or pictograph (🔥, ✅, ⚠) is a term of its own, one per character (a tag people search by);
  other symbols and marks are not terms;
* a query that is one CJK character (猫, は) keeps it, even a lone particle, and the search asks for the
  indexed bigrams holding it too (:meth:`memoryd.index.typos.Typos.containing`): a character is a word
  there, and the text around it was indexed in pairs;
* queries additionally drop filler words (English function words, Hinglish particles and request words
  such as ``woh``/``wala``/``hai``/``kaise``/``kare``) so a stray "the" never decides a ranking, and a
  Hinglish request word the record lacks does not count against it; the text a query embeds drops the
  Hinglish ones too (:func:`meaning_text`).

User text is never parsed as query syntax: only the emitted terms reach LanceDB.

*Scoring.*

* LanceDB is asked for indexed rows only (``fast_search``: no scan of rows written since the last index
  refresh, ~0.5 ms per written fragment; after 200 single-row writes a keyword query would take ~100 ms
  instead of ~5, and refreshing the indexes after every write costs hundreds of milliseconds).
* Rows written since are held by :class:`KeywordTail` and scored here, from their tokens, with the same
  BM25 (k1 1.2, b 0.75, a boost per column); :meth:`memoryd.index.store.IndexStore.optimize` refreshes the
  indexes and empties the tail. A row is answered once: when the tail holds it, its tail score is used and
  LanceDB's answer for it (a refresh finishing during the query) is dropped. A deleted row leaves the tail
  before its delete returns, and LanceDB does not return deleted rows. Tokens are LanceDB's
  (:func:`tokenize_many`: the tokenizer of the text index, stemming included), so a query matches a tail
  row exactly when it would match the row once indexed. A tail row's IDFs are the statistics over every
  row, its average lengths LanceDB's; LanceDB uses its index's own per-column counts, so a tail row's score
  is close to, not identical with, what the index will give it after the refresh.
* :class:`TermStats` holds the document frequencies of the keyword terms: LanceDB computes BM25 but does
  not expose IDF, and search needs it to tell a match on rare query terms from an accidental match on
  common ones (the keyword half's confidence). Updated on every write; counted from the table when the
  index opens, unless a saved copy is known to match the table (saved after every
  :meth:`memoryd.index.store.IndexStore.optimize`, keyed by the table's version and row count): counting
  means splitting every record's text, seconds at 100,000 records.

Thread-safety of the tail: one writer (the store, under its write lock), many readers; a short lock guards
its maps.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.index.loanwords import english
from memoryd.index.redact import PLACEHOLDERS
from memoryd.logs import get_logger

if TYPE_CHECKING:  # lancedb loads where it is used: the tool registry imports the term rules, not the index
    from lancedb.query import MultiMatchQuery
    from lancedb.table import AsyncTable

log = get_logger("memoryd.index.keyword")

# -- what a term is ----------------------------------------------------------------------------------

_CJK = (
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\u31f0-\u31ff\uff66-\uff9f"  # Katakana extensions, half-width katakana
)
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")
_CJK_ANY = re.compile(rf"[{_CJK}]")
CJK_CHAR = re.compile(rf"^[{_CJK}]$")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: Longest term kept; longer runs (hashes, base64 blobs) say nothing to a person searching.
MAX_TERM_CHARS = 40
#: Stands between a record's own main terms and those it carries from its group (a brief's task title), so
#: search can tell a match of its own from one its group's title makes (:mod:`memoryd.index.owned`); a
#: query never asks for it.
GROUP_MARK = "qzxgroupzxq"

#: Words a query drops: English function words, then Hinglish ones (particles, pronouns, question words, and the
#: forms of karna, hona, jana, sakna and chahiye that end a request: "... kaise set kare").
# fmt: off
ENGLISH_FILLER = frozenset([
    "a", "an", "the", "this", "that", "these", "those", "it", "its", "is", "are", "was", "were", "be", "been",
    "being", "am", "do", "does", "did", "done", "doing", "have", "has", "had", "having", "i", "me", "my", "we",
    "our", "us", "you", "your", "he", "she", "they", "them", "their", "his", "her", "of", "in", "on", "at", "to",
    "for", "from", "by", "with", "about", "as", "into", "onto", "over", "under", "again", "then", "than", "so",
    "such", "very", "too", "just", "also", "only", "any", "some", "all", "each", "every", "and", "or", "but", "if",
    "because", "while", "when", "where", "what", "which", "who", "whom", "whose", "why", "how", "there", "here",
    "not", "no", "nor", "can", "could", "should", "would", "will", "shall", "may", "might", "must", "let", "lets",
    "let's", "get", "got", "getting", "go", "going", "gone", "make", "made", "thing", "things", "stuff",
    "something", "anything", "everything", "someone", "one", "ones", "kind", "sort", "bit", "lot", "lots", "like",
    "really", "actually", "basically", "maybe", "please", "pls", "ok", "okay", "yeah", "yes", "hey", "hi", "oh",
    "um", "uh", "hmm", "well", "still", "yet", "now", "ago",
])
HINGLISH_FILLER = frozenset([
    "woh", "wo", "ye", "yeh", "yah", "jo", "jis", "jab", "tab", "kya", "kyu", "kyun", "kyon", "kab", "kahan",
    "kaha", "kidhar", "kaun", "kon", "kaunsa", "konsa", "kis", "kise", "kisne", "kaise", "kaisa", "kaisi",
    "kitna", "kitni", "kitne", "hai", "hain", "tha", "thi", "the", "thay", "tho", "toh", "bhi", "hi", "na",
    "nahi", "nahin", "nhi", "mat", "haan", "ka", "ki", "ke", "ko", "se", "me", "mein", "mai", "main", "par",
    "pe", "liye", "saath", "sath", "aur", "ya", "agar", "lekin", "magar", "sirf", "wala", "wali", "wale",
    "vala", "vali", "vale", "kuch", "kuchh", "koi", "sab", "bas", "ek", "mera", "meri", "mere", "apna", "apni",
    "apne", "aap", "hum", "tum", "iska", "iski", "uska", "uski", "raha", "rahi", "rahe", "ho", "hu", "hoon",
    "hota", "hoti", "hote", "hona", "hua", "hui", "hue", "hoga", "hogi", "honge", "kar", "karo", "kare",
    "karein", "karen", "karu", "karun", "karoon", "kariye", "karta", "karti", "karte", "karke", "karna",
    "kiya", "kiye", "gaya", "gayi", "gaye", "jata", "jaata", "jati", "jaati", "jate", "jaate", "jaye",
    "jaaye", "sakta", "sakti", "sakte", "sake", "chahiye", "diya", "de", "do", "dena", "lena", "liya", "abhi",
    "phir", "fir", "matlab", "yaar", "bhai", "wahi", "yahi", "waha", "yaha", "jaisa", "jaise",
])
FILLER = ENGLISH_FILLER | HINGLISH_FILLER
# fmt: on
#: The Hinglish filler words that are not also English words a query may mean ("the", "main", "tab", "par").
_HINGLISH_ONLY = HINGLISH_FILLER - ENGLISH_FILLER - {"main", "par", "tab", "mat", "sake", "hum", "de", "na"}


_SEPARATORS = re.compile(r"[_\-.]+")
#: Emoji and pictographs (Misc Symbols, Dingbats, arrows and stars, the emoji planes): each is a term.
_EMOJI = "\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff"
_EMOJI_CHAR = re.compile(r"^(?![\U0001f3fb-\U0001f3ff])" rf"[{_EMOJI}]$")  # a skin tone is no term
_WORD = re.compile(rf"[{_CJK}]+|[{_EMOJI}]|[\w\-.]+")  # a skin tone matches, and yields no term
_MIXED = re.compile(rf"[{_CJK}]+|[^{_CJK}]+")


#: Words each of the two word caches below keeps. They fill with every distinct word a board holds (ids,
#: paths and numbers too): at 65,536 words each, the text of the eval corpora (14,210 texts, 10 M
#: characters) left 40.6 MiB of Python objects in them; at 16,384 words 10.3 MiB, with the common words
#: still cached (splitting 6,000 of those texts: fastest of three runs 1.19 s against 1.16 s).
WORD_CACHE = 16384


# Pure and called once per word of every text: words repeat, so a 100 KB memory costs a few
# thousand splits instead of ~10,000 (a restart re-derives every changed record).
@lru_cache(maxsize=WORD_CACHE)
def _split_identifier(raw: str) -> tuple[str, ...]:
    parts: list[str] = []
    for chunk in _SEPARATORS.split(raw):
        camel = [m.group(0) for m in _CAMEL.finditer(chunk)]
        # a real camelCase name splits into words ("readSession", "S3UploadFailedError"); a random
        # string ("wJalrXUtnFEMI", "bPxRfiCY") splits into one- and two-letter shards: keep it whole
        shards = sum(1 for p in camel if p.isalpha() and len(p) <= 2)
        # an all-caps code ("KIAIOSFODNN7EXAMPL", "HTTP2") has no word boundaries to split at
        # ... and neither has an all-lower-case run such as "akiaiosfodnn7example" (no humps at all)
        whole = shards >= 2 or not any(c.islower() for c in chunk) or not any(c.isupper() for c in chunk)
        parts.extend([chunk] if whole else camel)
    return tuple(p.lower() for p in parts if p)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


_KATAKANA_RUN = re.compile(
    r"[\u30a1-\u30fa\u30fd-\u30ff\u31f0-\u31ff\uff66-\uff9f][\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]*"
)
_HIRAGANA = re.compile(r"^[\u3040-\u309f]$")


def _cjk_terms(run: str, query: bool) -> list[str]:
    """Bigrams of a CJK run, never across the edge of a katakana word: a loanword such as ログイン is a word
    of its own, and a bigram joining it to the particle after it ("ンの" in ログインのリダイレクト) matches
    every other katakana word followed by that particle ("ボタンの"). A lone hiragana letter left between
    two such words is a particle (の, が, を): a query drops it."""
    out: list[str] = []
    at = 0
    for m in _KATAKANA_RUN.finditer(run):
        out.extend(_cjk_piece(run[at : m.start()], query))
        out.extend(_bigrams(m.group(0)))
        for word, chars in english(m.group(0)):  # ログイン also finds "login" (memoryd.index.loanwords)
            out.extend(_word_terms(word, query) * (max(1, chars - 1) if query else 1))
        at = m.end()
    out.extend(_cjk_piece(run[at:], query))
    return out


def _cjk_piece(piece: str, query: bool) -> list[str]:
    if not piece or (query and _HIRAGANA.match(piece)):
        return []
    return _bigrams(piece)


def terms(text: str, *, query: bool = False) -> list[str]:
    """The keyword terms of ``text`` in order (duplicates kept: BM25 counts them).

    ``query=True`` drops filler words. Returns ``[]`` for empty or punctuation-only text.
    """
    # a redaction placeholder must never be findable: searching "aws secret key" would otherwise
    # confirm that a secret was there
    text = PLACEHOLDERS.sub(" ", unicodedata.normalize("NFKC", text))
    out: list[str] = []
    words = _WORD.findall(text)
    for raw in words:
        out.extend(_word_terms(raw, query))
    if query and not out and len(words) == 1 and _CJK_RUN.match(words[0]) and len(words[0]) == 1:
        return [words[0]]  # a lone particle asked alone is what is asked for
    return [t for t in out if t != GROUP_MARK] if query and GROUP_MARK in out else out


# One word's terms depend on the word alone, and words repeat: a long text costs a lookup per word.
@lru_cache(maxsize=WORD_CACHE)
def _word_terms(raw: str, query: bool) -> tuple[str, ...]:
    raw = raw.strip("-.")
    if not raw:
        return ()
    if _CJK_RUN.match(raw):
        return tuple(_cjk_terms(raw, query))
    if _EMOJI_CHAR.match(raw):
        return (raw,)
    out: list[str] = []
    # a mixed run such as "v3のページ" splits into its CJK and non-CJK parts
    for piece in _MIXED.findall(raw):
        piece = piece.strip("-._")
        if not piece:
            continue
        if _CJK_RUN.match(piece):
            out.extend(_cjk_terms(piece, query))
            continue
        whole = piece.lower()
        parts = _split_identifier(piece)
        split = len(parts) != 1 or parts[0] != whole
        if len(whole) <= MAX_TERM_CHARS and split and not (query and whole in FILLER):
            out.append(whole)
        for part in parts:
            # one-letter fragments of a split ("v3" -> "v") match everything and mean nothing
            if len(part) > MAX_TERM_CHARS or (len(part) < 2 and len(parts) > 1) or (query and part in FILLER):
                continue
            out.append(part)
    return tuple(out)


_LATIN_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def meaning_text(query: str) -> str:
    """``query`` as the embedding model is given it: without its Hinglish filler words (the model reads
    romanized Hindi particles as noise that pulls the query away from its subject: "login button ka colour
    kaise set kare" sat 0.04 above the reference passages, "login button colour set" 0.07); the query itself
    when nothing else would be left."""
    kept = _LATIN_WORD.sub(lambda m: "" if m.group(0).lower() in _HINGLISH_ONLY else m.group(0), query)
    kept = " ".join(kept.split())
    return kept if _LATIN_WORD.search(kept) or _CJK_ANY.search(kept) else query


def term_string(text: str, *, query: bool = False) -> str:
    """:func:`terms` joined by spaces, the form stored in the full-text columns."""
    return " ".join(terms(text, query=query))


# -- LanceDB's full-text indexes ----------------------------------------------------------------------

#: Joins texts for one tokenizer call (one call costs ~0.6 ms, its text's length hardly matters): a word
#: no text holds (term strings are lower-case letters, digits and a few marks; this has no vowel run a
#: stemmer would cut).
SEPARATOR = "qzxsepzxq"


async def tokenize_many(table: AsyncTable, texts: Sequence[str], column: str) -> list[list[str]]:
    """One token list per text, as the full-text index of ``column`` tokenises it (one call)."""
    if not texts:
        return []
    toks = await table.tokenize(f" {SEPARATOR} ".join(texts), column=column)
    out: list[list[str]] = [[]]
    for tok in toks:
        if tok.text == SEPARATOR:
            out.append([])
        else:
            out[-1].append(tok.text)
    if len(out) != len(texts):  # a text held the separator after all: one call each
        out = []
        for text in texts:
            out.append([t.text for t in await table.tokenize(text, column=column)])
    return out


async def search(
    table: AsyncTable,
    tail: KeywordTail,
    query: MultiMatchQuery | None,
    query_terms: str,
    where: str | None,
    limit: int,
    idf: Callable[[str], float],
    keep: Callable[[list[str]], set[str]],
    column: str,
    avg: Sequence[float] | None = None,
    rows: int = 0,
) -> list[tuple[str, float]]:
    """``[(id, score)]`` best first, at most ``limit``: indexed rows from LanceDB (``query`` None: the
    indexes do not exist yet and the tail holds every row) and tail rows scored in memory.

    ``idf``: a query term's IDF; ``keep``: which of some tail ids pass ``where``; ``avg``: tokens per row
    of each text column over every row (LanceDB scores rows outside its indexes with those); ``rows``: rows
    in the table. When the tail holds at least as many rows as the indexes cover (a new store between two
    refreshes), LanceDB's hits are scored in memory as well: its figures come from the few rows it indexed
    (a term in 1 of 1 indexed rows weighs ~0.3 instead of ~2 among 10), so they would not compare with the
    tail's."""
    # The tail first, as one snapshot: a row it holds is scored from it (LanceDB's answer for it is
    # dropped), and a row it no longer holds left it after a refresh had put it in the indexes, which
    # LanceDB, asked afterwards, then covers. Asked the other way round, a refresh ending between the two
    # would lose the row from both.
    held: frozenset[str] = frozenset()
    newer: list[tuple[str, float]] = []
    weights: dict[str, float] = {}
    if len(tail):
        # a term asked n times weighs n times, as LanceDB scores it
        asked = Counter(query_terms.split())
        terms = list(asked)
        for term, toks in zip(terms, await tokenize_many(table, terms, column), strict=True):
            for tok in toks:
                weights[tok] = max(weights.get(tok, 0.0), idf(term) * asked[term])
        held, newer = tail.score_held(weights, keep, avg)
    indexed: list[tuple[str, float]] = []
    if query is not None:
        q = table.query().nearest_to_text(query).select(["id", "_score"]).limit(limit + min(len(held), limit))
        q = q.fast_search()
        if where:
            q = q.where(where)  # a filter before ranking, as the sync API's prefilter=True
        got = await q.to_arrow()
        pairs = zip(got.column("id").to_pylist(), got.column("_score").to_pylist(), strict=True)
        indexed = [(i, float(s)) for i, s in pairs if i not in held]
        if indexed and held and len(held) >= rows - len(held):
            indexed = await _rescored(table, tail, [i for i, _ in indexed], weights, avg)
    if not newer:
        return indexed[:limit]
    merged = sorted([*indexed, *newer], key=lambda e: (-e[1], e[0]))
    return merged[:limit]


async def _rescored(
    table: AsyncTable,
    tail: KeywordTail,
    ids: list[str],
    weights: dict[str, float],
    avg: Sequence[float] | None,
) -> list[tuple[str, float]]:
    """Indexed rows ``ids`` scored as the tail scores its own (same tokens, IDFs and lengths), best first."""
    in_list = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    got = await table.query().where(f"id IN ({in_list})").select(["id", *tail.columns]).to_arrow()
    found = got.column("id").to_pylist()
    per_column = [await tokenize_many(table, got.column(c).to_pylist(), c) for c in tail.columns]
    scratch = KeywordTail(tail.columns, tail.boosts)
    for n, rid in enumerate(found):
        scratch.put(rid, [col[n] for col in per_column])
    return scratch.score_held(weights, lambda matched: set(matched), avg)[1]


def tokens(table, texts: Sequence[str], column: str) -> list[list[str]]:
    """:func:`tokenize_many` for a sync LanceDB table (its text index must exist); blocks."""
    from lancedb.background_loop import LOOP

    return asyncio.run_coroutine_threadsafe(tokenize_many(table._table, texts, column), LOOP.loop).result()


def unindexed(table) -> int:
    """Rows of a sync LanceDB table that its text indexes do not cover (0 for another table layout)."""
    from lancedb.background_loop import LOOP
    from lancedb.table import AsyncTable

    inner = getattr(table, "_table", None)
    if not isinstance(inner, AsyncTable):
        return 0

    async def count() -> int:
        names = [i.name for i in await inner.list_indices() if i.index_type == "FTS"]
        stats = [await inner.index_stats(n) for n in names]
        return max((s.num_unindexed_rows for s in stats if s is not None), default=0)

    return asyncio.run_coroutine_threadsafe(count(), LOOP.loop).result()


# -- the tail of rows the text indexes do not cover yet -------------------------------------------------

K1 = 1.2
B = 0.75


class KeywordTail:
    """Tokens of the rows not yet in the full-text indexes, per column (``columns`` in boost order)."""

    def __init__(self, columns: Sequence[str], boosts: Sequence[float]) -> None:
        self.columns = tuple(columns)
        self.boosts = tuple(boosts)
        self._lock = threading.Lock()
        # id -> per column (term -> frequency, length in tokens)
        self._rows: dict[str, tuple[tuple[Counter[str], int], ...]] = {}
        # per column: term -> {id: frequency}
        self._postings: list[dict[str, dict[str, int]]] = [{} for _ in self.columns]
        self._lengths = [0] * len(self.columns)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, rid: object) -> bool:
        return rid in self._rows

    def ids(self) -> frozenset[str]:
        """The ids held now (a copy)."""
        with self._lock:
            return frozenset(self._rows)

    def put(self, rid: str, tokens: Sequence[Sequence[str]]) -> None:
        """Hold row ``rid`` with one token list per column (replacing an earlier version of it)."""
        per = tuple((Counter(t), len(t)) for t in tokens)
        with self._lock:
            self._remove(rid)
            self._rows[rid] = per
            for c, (tf, n) in enumerate(per):
                self._lengths[c] += n
                post = self._postings[c]
                for term, k in tf.items():
                    post.setdefault(term, {})[rid] = k

    def drop(self, ids: Iterable[str]) -> None:
        """Forget these rows (deleted, or now covered by the indexes)."""
        with self._lock:
            for rid in ids:
                self._remove(rid)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._postings = [{} for _ in self.columns]
            self._lengths = [0] * len(self.columns)

    def _remove(self, rid: str) -> None:
        per = self._rows.pop(rid, None)
        if per is None:
            return
        for c, (tf, n) in enumerate(per):
            self._lengths[c] -= n
            post = self._postings[c]
            for term in tf:
                hits = post.get(term)
                if hits is not None:
                    hits.pop(rid, None)
                    if not hits:
                        del post[term]

    def score_held(
        self,
        idf: dict[str, float],
        keep: Callable[[list[str]], set[str]],
        avg: Sequence[float] | None = None,
    ) -> tuple[frozenset[str], list[tuple[str, float]]]:
        """``(ids held, [(id, BM25)])`` from one look at the tail, so every id scored was held and every held
        id is named, however the tail changes meanwhile. The scores: held rows matching any token of ``idf``
        (token as the index makes it -> its IDF), best first; ``keep`` receives the matching ids and returns
        those that pass the filters. ``avg``: tokens per row of each column over every row (as LanceDB uses
        them); default: the tail's."""
        terms = list(idf)
        scores: dict[str, float] = {}
        with self._lock:
            held = frozenset(self._rows)
            count = len(self._rows)
            if not count or not terms:
                return held, []
            for c, boost in enumerate(self.boosts):
                mean = avg[c] if avg is not None and avg[c] > 0 else self._lengths[c] / count
                mean = max(mean, 1e-9)
                post = self._postings[c]
                for term in terms:
                    hits = post.get(term)
                    if not hits:
                        continue
                    w = boost * idf[term]
                    for rid, tf in hits.items():
                        norm = tf + K1 * (1 - B + B * self._rows[rid][c][1] / mean)
                        scores[rid] = scores.get(rid, 0.0) + w * tf * (K1 + 1) / norm
        if not scores:
            return held, []
        allowed = keep(list(scores))
        return held, sorted(((i, s) for i, s in scores.items() if i in allowed), key=lambda e: (-e[1], e[0]))


# -- term statistics ----------------------------------------------------------------------------------

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
