"""The compact Unigram tokenizer against the ``tokenizers`` one it replaces (the real 250k-piece vocabulary).

The ids must be identical -- the model was trained on them -- on realistic text of every kind agents store:
English, Hinglish, Japanese, code, URLs, scientific prose, chat turns, and the odd corners (special-token
strings in text, whitespace runs, full-width forms, unknown characters). The vectors of the default model
must then be those of the previous build (same graph, ``tokenizer.json``).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from tests.conftest import need_shared

from memoryd.index import pieces, unigram
from memoryd.index.embed import load_embedder

pytestmark = pytest.mark.slow

ODD = [
    "",
    " ",
    "   ",
    " leading space",
    "trailing space ",
    "two  spaces\tand a tab\nand a newline\r\n\r\nand a blank line",
    "a<s>b",
    "<s>",
    " <s> x </s> ",
    "the html <s>struck</s> tag and <pad><pad> and <unk> and <mask> here",
    "＜s＞ full-width brackets",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ ① Ⅻ ㈱ ㌔ ﬁle",
    "\u3000全角スペース\u3000と　空白",
    "営業時間は9時～17時です",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "e\u0301 combining accent, and é precomposed",
    "\x00\x01\x7f control characters",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters, emoji 🤖🔥👍🏽 and ✓ ✗ → ←",
    "𐌰𐌱𐌲 gothic and ꯀꯁ meitei: characters no piece covers",
    "===================== ---------- ######## ~~~~~",
    "https://example.com/a/b_c?d=e&f=g%20h#frag and git@github.com:org/repo.git",
    "C:\\Users\\dev\\AppData\\Local\\memoryd\\board",
    "woh wala bug jo mobile pe keyboard ke neeche send button chhupa deta hai",
    "checkout pe 502 aa raha hai jab payment provider slow hota hai, kal tak fix karna hai",
    "ログインページが何度もリダイレクトされる。決済プロバイダーがタイムアウトすると失敗する",
    "लॉगिन पेज बार बार रीडायरेक्ट हो रहा है",
    "def f(x: int) -> dict[str, list[int]]:\n    return {'a': [x ** 2 for _ in range(3)]}  # noqa",
    "SELECT id, created_at FROM briefs WHERE task = 't-1' AND said ILIKE '%redirect%';",
    "error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.",
    '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search_briefs"}}',
]


def corpus() -> list[str]:
    """Every board-v1 file's text, a seeded sample of each eval corpus and query set, and :data:`ODD`."""
    texts = list(ODD)
    root = need_shared("eval")
    for path in sorted((root / "board-v1" / "board").rglob("*")):
        if path.suffix in (".md", ".txt", ".json"):
            texts.append(path.read_text(encoding="utf-8"))
    rng = random.Random(14)
    for path in sorted(root.glob("*/*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for row in rng.sample(rows, min(len(rows), 300)):
            texts.extend(row[k] for k in ("text", "query") if isinstance(row.get(k), str))
    return texts


@pytest.fixture(scope="module")
def lean(embedder):
    return unigram.UnigramTokenizer(embedder.model_dir)


@pytest.fixture(scope="module")
def texts():
    texts = corpus()
    assert len(texts) > 1500, "the eval corpora are missing"
    return texts


def test_ids_are_those_of_the_tokenizers_unigram(lean, reference_tokenizer, texts):
    expected = [reference_tokenizer.encode(t).ids for t in texts]  # one by one: a batch is padded
    got = lean.encode_batch(texts)
    differ = [t[:80] for t, a, b in zip(texts, expected, got, strict=True) if a != b]
    assert differ == []
    bare = [reference_tokenizer.encode(t, add_special_tokens=False).ids for t in ODD]
    assert [lean.encode(t, add_special_tokens=False) for t in ODD] == bare


def test_offsets_are_those_of_the_tokenizers_unigram(lean, reference_tokenizer, texts):
    for text in texts[::7] + ODD:
        expected = [tuple(o) for o in reference_tokenizer.encode(text, add_special_tokens=False).offsets]
        assert lean.offsets(text) == expected, text[:80]


def test_a_word_cache_that_fills_up_changes_no_ids(lean, reference_tokenizer, monkeypatch):
    monkeypatch.setattr(unigram, "_CACHE_WORDS", 3)
    text = "the same few words again and again, the same few words"
    assert lean.encode(text) == lean.encode(text) == reference_tokenizer.encode(text).ids


def test_vectors_are_those_of_the_previous_build(tmp_path, embedder, reference_tokenizer, texts):
    """The same graph with the ``tokenizers`` tokenizer (the build before ``tokenizer.pieces``)."""
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "model.onnx").symlink_to(embedder.model_dir / "model.onnx")
    reference_tokenizer.save(str(previous / "tokenizer.json"))
    (previous / "memoryd-model.json").write_text((embedder.model_dir / "memoryd-model.json").read_text())
    old, status = load_embedder(str(previous), tmp_path)
    assert old is not None, status
    sample = ODD + texts[::40]
    for embed in ("embed_queries", "embed_passages"):
        cos = (getattr(old, embed)(sample) * getattr(embedder, embed)(sample)).sum(axis=1)
        assert cos.min() >= 0.999, sample[int(np.argmin(cos))][:80]
    long = " ".join(texts[100:110])
    assert old.chunks(long) == embedder.chunks(long)
    assert old.count_tokens(long) == embedder.count_tokens(long)


def test_pieces_must_be_distinct_and_a_bad_file_fails_the_load(tmp_path, embedder):
    with pytest.raises(ValueError):
        unigram.write_pieces(tmp_path / unigram.PIECES_FILE, ["a", "a"], [0.0, -1.0], 0)
    with pytest.raises(ValueError):
        unigram.write_pieces(tmp_path / unigram.PIECES_FILE, ["a\0b"], [0.0], 0)
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("model.onnx", "memoryd-model.json"):
        (broken / name).symlink_to(embedder.model_dir / name)
    (broken / unigram.PIECES_FILE).write_bytes(b"MDU1" + b"\xff" * 20)
    loaded, status = load_embedder(str(broken), tmp_path)
    assert loaded is None and status.state == "failed"


def test_pieces_of_one_hash_are_told_apart():
    """CPython hashes a str's buffer: "pg" (1-byte characters) and "杰" (U+6770) share a hash."""
    assert hash("pg") == hash("杰")
    table = pieces.PieceTable(["<unk>", "杰", "ab", "pgx"])
    assert table.get("杰") == 1
    assert table.get("pg") is None
    assert table.find(["pg", "ab", "杰", "x", "pgx"]) == [(1, 2), (2, 1), (4, 3)]
    both = pieces.PieceTable(["<unk>", "pg", "杰"])
    assert (both.get("pg"), both.get("杰")) == (1, 2)
    assert not both.duplicated() and pieces.PieceTable(["a", "pg", "a"]).duplicated()
    # many hits at once (the vectorised check): "杰" ahead of "pg" among the pieces of that hash
    many = [f"w{i}" for i in range(100)]
    table = pieces.PieceTable(["<unk>", "杰", "pg", *many])
    texts = ["pg", *many, "杰", "gp", "杰杰"]
    assert table.find(texts) == [(0, 2), *((k + 1, k + 3) for k in range(100)), (101, 1)]
    assert pieces.PieceTable(["<unk>", "杰", *many]).find(texts)[0] == (1, 2)  # "pg" is no piece there


def test_the_vocabulary_holds_no_python_object_per_piece(embedder):
    """250k pieces as a dict of strings and ints took 36 MiB of Python objects; the table far less."""
    import tracemalloc

    tracemalloc.start()
    try:
        lean = unigram.UnigramTokenizer(embedder.model_dir)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(lean._pieces) > 250_000
    assert held < 16 * 2**20
