"""What a keyword (BM25) term is: the one rule documents and queries both go through.

Documents and queries go through the same :func:`terms` so the LanceDB full-text index can use a
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
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from memoryd.index.loanwords import english
from memoryd.index.redact import PLACEHOLDERS

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
