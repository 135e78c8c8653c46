"""Text processing for the keyword (BM25) half of the index.

Documents and queries go through the same :func:`terms` so the LanceDB full-text index can use a
plain whitespace tokenizer: we decide what a term is, LanceDB only counts them. Rules:

* NFKC + lower case; URLs and paths split on punctuation like any other text;
* identifiers are kept whole *and* split (``refresh_token_reused`` -> ``refresh_token_reused refresh
  token reused``; ``readSession`` -> ``readsession read session``), the standard trick for code
  search (CoSQA needs it);
* runs of CJK characters (Han, Hiragana, Katakana, Hangul) become overlapping character bigrams, the
  usual dictionary-free CJK indexing (e.g. Lucene's CJKBigramFilter), since Japanese has no spaces;
* queries additionally drop filler words (English function words, Hinglish particles such as
  ``woh``/``wala``/``hai``) so a stray "the" never decides a ranking.

User text is never parsed as query syntax: only the emitted terms reach LanceDB.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_CJK = (
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\u31f0-\u31ff\uff66-\uff9f"  # Katakana extensions, half-width katakana
)
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}](?:[\w{_CJK}]*[^\W{_CJK}])?|[^\W{_CJK}]", re.UNICODE)
_WORDISH = re.compile(rf"[{_CJK}]+|[\w]+", re.UNICODE)
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
PLACEHOLDER = re.compile(r"\[REDACTED:[A-Za-z0-9_-]*\]")
#: Longest term kept; longer runs (hashes, base64 blobs) say nothing to a person searching.
MAX_TERM_CHARS = 40

FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "done",
        "doing",
        "have",
        "has",
        "had",
        "having",
        "i",
        "me",
        "my",
        "we",
        "our",
        "us",
        "you",
        "your",
        "he",
        "she",
        "they",
        "them",
        "their",
        "his",
        "her",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "about",
        "as",
        "into",
        "onto",
        "over",
        "under",
        "again",
        "then",
        "than",
        "so",
        "such",
        "very",
        "too",
        "just",
        "also",
        "only",
        "any",
        "some",
        "all",
        "each",
        "every",
        "and",
        "or",
        "but",
        "if",
        "because",
        "while",
        "when",
        "where",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "there",
        "here",
        "not",
        "no",
        "nor",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "let",
        "lets",
        "let's",
        "get",
        "got",
        "getting",
        "go",
        "going",
        "gone",
        "make",
        "made",
        "thing",
        "things",
        "stuff",
        "something",
        "anything",
        "everything",
        "someone",
        "one",
        "ones",
        "kind",
        "sort",
        "bit",
        "lot",
        "lots",
        "like",
        "really",
        "actually",
        "basically",
        "maybe",
        "please",
        "pls",
        "ok",
        "okay",
        "yeah",
        "yes",
        "hey",
        "hi",
        "oh",
        "um",
        "uh",
        "hmm",
        "well",
        "still",
        "yet",
        "now",
        "ago",
        "woh",
        "wo",
        "ye",
        "yeh",
        "yah",
        "jo",
        "jis",
        "jab",
        "tab",
        "kya",
        "kyu",
        "kyun",
        "kaise",
        "kaisa",
        "kaisi",
        "hai",
        "hain",
        "tha",
        "thi",
        "the",
        "thi",
        "tho",
        "toh",
        "bhi",
        "hi",
        "na",
        "nahi",
        "nhi",
        "mat",
        "ka",
        "ki",
        "ke",
        "ko",
        "se",
        "me",
        "mein",
        "mai",
        "main",
        "par",
        "pe",
        "aur",
        "ya",
        "wala",
        "wali",
        "wale",
        "vala",
        "vali",
        "vale",
        "kuch",
        "koi",
        "sab",
        "bas",
        "ek",
        "raha",
        "rahi",
        "rahe",
        "ho",
        "hota",
        "hoti",
        "hote",
        "kar",
        "karo",
        "karna",
        "kiya",
        "kiye",
        "gaya",
        "gayi",
        "gaye",
        "diya",
        "de",
        "do",
        "dena",
        "lena",
        "liya",
        "abhi",
        "phir",
        "fir",
        "matlab",
        "yaar",
        "bhai",
        "wahi",
        "yahi",
        "waha",
        "yaha",
        "jaisa",
        "jaise",
    ]
)


def normalize(text: str) -> str:
    """NFKC and lower case; the one normalisation both halves of the keyword index share."""
    return unicodedata.normalize("NFKC", text).lower()


_SEPARATORS = re.compile(r"[_\-.]+")
_WORD = re.compile(rf"[{_CJK}]+|[\w\-.]+")
_MIXED = re.compile(rf"[{_CJK}]+|[^{_CJK}]+")


# Pure and called once per word of every text: words repeat, so a 100 KB memory costs a few
# thousand splits instead of ~10,000 (a restart re-derives every changed record).
@lru_cache(maxsize=65536)
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


def terms(text: str, *, query: bool = False) -> list[str]:
    """The keyword terms of ``text`` in order (duplicates kept: BM25 counts them).

    ``query=True`` drops filler words. Returns ``[]`` for empty or punctuation-only text.
    """
    # a redaction placeholder must never be findable: searching "aws secret key" would otherwise
    # confirm that a secret was there
    text = PLACEHOLDER.sub(" ", unicodedata.normalize("NFKC", text))
    out: list[str] = []
    for raw in _WORD.findall(text):
        out.extend(_word_terms(raw, query))
    return out


# One word's terms depend on the word alone, and words repeat: a long text costs a lookup per word.
@lru_cache(maxsize=65536)
def _word_terms(raw: str, query: bool) -> tuple[str, ...]:
    raw = raw.strip("-.")
    if not raw:
        return ()
    if _CJK_RUN.match(raw):
        return tuple(_bigrams(raw))
    out: list[str] = []
    # a mixed run such as "v3のページ" splits into its CJK and non-CJK parts
    for piece in _MIXED.findall(raw):
        piece = piece.strip("-._")
        if not piece:
            continue
        if _CJK_RUN.match(piece):
            out.extend(_bigrams(piece))
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


def term_string(text: str, *, query: bool = False) -> str:
    """:func:`terms` joined by spaces, the form stored in the full-text columns."""
    return " ".join(terms(text, query=query))
