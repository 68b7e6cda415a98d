"""``brainmem-ros bench --peers``: brainmem's store against the vector stores a user could pick.

``brainmem-ros bench --peers``: brainmem's long-term store against the vector stores a user would
pick instead, on identical data and queries.

Every system gets the same kitchen memories with the same MiniLM vectors (computed once and cached)
and the same query vectors, so only the store differs. Each runs in its own process, so that its
resident memory is its own and one system's caches cannot warm another's. Each peer is used as its
documentation recommends: ChromaDB through ``PersistentClient`` with batched ``add`` (at most the
client's own batch limit) and a ``where`` filter; Qdrant in local mode (``QdrantClient(path=...)``)
with batched ``upsert`` and a payload ``Filter``.

The two queries, each top-10 by cosine similarity:

- filtered: agent ``robot_a`` and zone ``episodic`` (about 54% of the memories);
- unfiltered: the peers search the whole collection; brainmem searches every zone of ``robot_a``
  (90% of the memories), the widest query it serves, since agent isolation is never off.

Recall is measured against exact search (numpy, over the same rows each query may return).
brainmem's superseded facts are included in its answers here, as the peers know no supersession.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
from brainmem_ros.core.latency import percentile
from tqdm import tqdm

__all__ = ["PEERS", "SYSTEMS", "PeerUnavailable", "bench_system", "run_peers", "format_peer_table"]

SYSTEMS = ("brainmem", "chromadb", "qdrant")
PEERS = ("chromadb", "qdrant")
FILTER_AGENT, FILTER_ZONE = "robot_a", "episodic"
K = 10


class PeerUnavailable(RuntimeError):
    """A peer's client library is not installed (``make peers`` installs both)."""


@dataclass
class Data:
    """What every system is given: memories (agent, zone, vector) and queries, identical for all."""

    agents: list[str]
    zones: list[str]
    vectors: np.ndarray
    queries: np.ndarray

    def mask(self, filtered: bool, unfiltered_agent: Optional[str] = None) -> np.ndarray:
        agents = np.asarray(self.agents)
        if filtered:
            return (agents == FILTER_AGENT) & (np.asarray(self.zones) == FILTER_ZONE)
        if unfiltered_agent:
            return agents == unfiltered_agent
        return np.ones(len(self.agents), dtype=bool)


def exact_top_k(data: Data, mask: np.ndarray) -> tuple[list[set[int]], np.ndarray]:
    """Per query: the exact top-K indices, and the K-th best similarity (for tie-aware recall)."""
    allowed = np.flatnonzero(mask)
    sims = data.queries @ data.vectors[allowed].T
    top = np.argsort(-sims, axis=1)[:, :K]
    kth = np.take_along_axis(sims, top, axis=1)[:, -1]
    return [set(allowed[row].tolist()) for row in top], kth


def tie_aware_hits(found_sims: np.ndarray, kth_exact: float, k: int = K) -> int:
    """Count results at least as close as the exact K-th neighbour (ann-benchmarks' definition)."""
    return min(k, int(np.count_nonzero(np.asarray(found_sims) >= kth_exact - 1e-5)))


def _rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# -- the systems -------------------------------------------------------------------------------
class BrainmemSystem:
    name = "brainmem"
    unfiltered_agent = FILTER_AGENT

    def __init__(self, folder: Path):
        from brainmem_ros.core.config import MemoryConfig
        from brainmem_ros.bench.corpus import CORPUS_NOW
        from brainmem_ros.core.memory import BrainMemory

        config = MemoryConfig().replace(**{
            "store.path": str(folder / "memory.db"),
            "consolidation.every_n_traces": 0
        })
        self.memory = BrainMemory(config, embedder=_NoEmbedder(), clock=lambda: CORPUS_NOW)
        self.rowid_to_index: dict[int, int] = {}

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        from brainmem_ros.core.trace import Entry, Zone

        entries = [
            Entry(a, Zone(z), t, v, importance=0.5)
            for t, a, z, v in zip(texts, agents, zones, vectors)
        ]
        ids = self.memory.store_entries(entries)
        for offset, entry_id in enumerate(ids):
            self.rowid_to_index[self.memory.store.rowid_of(entry_id)] = start + offset

    def settle(self) -> None:
        """Ingest ends when the graphs hold every row (they fill behind the writes)."""
        self.memory.store.wait_indexed()

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        from brainmem_ros.core.trace import LONG_TERM_ZONES, Zone

        zones = [Zone(FILTER_ZONE)] if filtered else list(LONG_TERM_ZONES)
        hits = self.memory.store.vector_search(vector, FILTER_AGENT, zones, K,
                                               include_superseded=True)
        return [self.rowid_to_index[r] for r, _ in hits]

    def close(self) -> None:
        self.memory.close()


class _NoEmbedder:
    """Every vector is given; a call to embed would be a bench defect."""

    name, backend, dim = "none (vectors given)", "", 384

    def embed(self, texts):
        raise AssertionError("the peers bench gives every vector")


class ChromaSystem:
    name = "chromadb"
    unfiltered_agent = None

    def __init__(self, folder: Path):
        try:
            import chromadb
            from chromadb.config import Settings
        except ImportError as exc:
            raise PeerUnavailable("chromadb is not installed: run `make peers`") from exc
        self.client = chromadb.PersistentClient(path=str(folder / "chroma"),
                                                settings=Settings(anonymized_telemetry=False))
        self.collection = self.client.create_collection("memories",
                                                        metadata={"hnsw:space": "cosine"})
        self.batch = self.client.get_max_batch_size()

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        for s in range(0, len(texts), self.batch):
            e = min(len(texts), s + self.batch)
            self.collection.add(
                ids=[str(start + i) for i in range(s, e)], embeddings=vectors[s:e],
                documents=list(texts[s:e]), metadatas=[{
                    "agent": a,
                    "zone": z
                } for a, z in zip(agents[s:e], zones[s:e])])

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        where = {"$and": [{"agent": FILTER_AGENT}, {"zone": FILTER_ZONE}]} if filtered else None
        answer = self.collection.query(query_embeddings=[vector], n_results=K, where=where,
                                       include=[])
        return [int(i) for i in answer["ids"][0]]

    def close(self) -> None:
        del self.collection, self.client


class QdrantSystem:
    name = "qdrant"
    unfiltered_agent = None

    def __init__(self, folder: Path):
        try:
            from qdrant_client import QdrantClient, models
        except ImportError as exc:
            raise PeerUnavailable("qdrant-client is not installed: run `make peers`") from exc
        self.models = models
        self.client = QdrantClient(path=str(folder / "qdrant"))
        self.client.create_collection(
            "memories", vectors_config=models.VectorParams(size=384,
                                                           distance=models.Distance.COSINE))
        self.filter = models.Filter(must=[
            models.FieldCondition(key="agent", match=models.MatchValue(value=FILTER_AGENT)),
            models.FieldCondition(key="zone", match=models.MatchValue(value=FILTER_ZONE))
        ])

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        self.client.upsert(
            "memories", points=self.models.Batch(
                ids=list(range(start, start + len(texts))), vectors=vectors.tolist(), payloads=[{
                    "agent": a,
                    "zone": z,
                    "text": t
                } for t, a, z in zip(texts, agents, zones)]))

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        answer = self.client.query_points("memories", query=vector.tolist(), limit=K,
                                          query_filter=self.filter if filtered else None)
        return [int(p.id) for p in answer.points]

    def close(self) -> None:
        self.client.close()


_FACTORIES: dict[str, Callable[[Path], object]] = {
    "brainmem": BrainmemSystem,
    "chromadb": ChromaSystem,
    "qdrant": QdrantSystem
}

# -- one system at one size, in its own process --------------------------------------------------


def bench_system(name: str, n: int, vectors_path: str, queries_path: str,
                 progress: bool = True) -> dict:
    """Build ``name``'s store of the first ``n`` bench memories, then time and check its queries."""
    from brainmem_ros.bench.corpus import make_corpus

    corpus = make_corpus(n)
    data = Data([c.agent_id for c in corpus], [c.zone.value for c in corpus],
                np.load(vectors_path, mmap_mode="r")[:n].astype(np.float32), np.load(queries_path))
    texts = [c.text for c in corpus]
    folder = Path(tempfile.mkdtemp(prefix=f"brainmem-peers-{name}-{n}-"))
    try:
        rss_before = _rss_bytes()
        system = _FACTORIES[name](folder)
        batch = 1000
        t0 = time.perf_counter()
        for start in tqdm(range(0, n, batch), desc=f"{name}: storing {n:,}", unit_scale=batch,
                          leave=False, disable=not progress):
            end = min(n, start + batch)
            system.insert(start, texts[start:end], data.agents[start:end], data.zones[start:end],
                          data.vectors[start:end])
        getattr(system, "settle", lambda: None)()  # the peers index as they insert
        ingest_s = time.perf_counter() - t0
        figures: dict = {"entries": n, "ingest_preembedded_per_s": n / ingest_s}
        for filtered, prefix in ((True, "query_filtered"), (False, "query")):
            truth, kth = exact_top_k(data, data.mask(filtered, system.unfiltered_agent))
            latencies, hits, id_hits = [], 0, 0
            for i, vector in enumerate(data.queries):
                t = time.perf_counter()
                found = system.query(vector, filtered)
                latencies.append((time.perf_counter() - t) * 1000)
                id_hits += len(truth[i] & set(found))
                hits += tie_aware_hits(data.vectors[found] @ vector if found else np.zeros(0),
                                       kth[i])
            figures[f"{prefix}_p50_ms"] = percentile(latencies, 50)
            figures[f"{prefix}_p99_ms"] = percentile(latencies, 99)
            expected = max(1, sum(len(t) for t in truth))
            figures["recall" if filtered else "recall_unfiltered"] = hits / expected
            figures["recall_ids" if filtered else "recall_unfiltered_ids"] = id_hits / expected
        figures["resident_bytes_per_entry"] = max(0, _rss_bytes() - rss_before) / n
        system.close()
        figures["bytes_per_entry"] = _disk_bytes(folder) / n
        return figures
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _in_child(name: str, n: int, vectors_path: Path, queries_path: Path,
              progress: bool) -> tuple[str, object]:
    """Run ``bench_system`` in a fresh interpreter.

    A child that dies is reported, never waited on.
    """
    with tempfile.TemporaryDirectory(prefix="brainmem-peer-") as folder:
        out = Path(folder) / "figures.json"
        command = [
            sys.executable, "-m", "brainmem_ros.bench.peers", name,
            str(n),
            str(vectors_path),
            str(queries_path),
            str(out)
        ] + ([] if progress else ["--quiet"])
        done = subprocess.run(command, stdout=subprocess.DEVNULL,
                              stderr=None if progress else subprocess.PIPE, text=True)
        if out.is_file():
            return tuple(json.loads(out.read_text()))
        tail = (done.stderr or "")[-400:].strip()
        return "error", f"{name} exited with status {done.returncode}" + (f": {tail}"
                                                                          if tail else "")


def run_peers(sizes: Sequence[int], systems: Sequence[str], vectors_path: Path, queries_path: Path,
              progress: bool = True, peer_max_size: int = 100000) -> dict:
    """``systems.<name>.<N>``: figures, or ``{"skipped": why}`` / ``{"error": what}``.

    Peers are skipped above ``peer_max_size`` (Qdrant's local mode searches by brute force and says
    it is not meant for more than 20,000 points; ChromaDB takes minutes per 100k here).
    """
    report: dict = {name: {} for name in systems}
    for n in sizes:
        for name in systems:
            if name != "brainmem" and n > peer_max_size:
                report[name][str(n)] = {"skipped": f"above --peer-max-size {peer_max_size:,}"}
                continue
            status, value = _in_child(name, n, vectors_path, queries_path, progress)
            report[name][str(n)] = value if status == "ok" else {
                "skipped" if status == "unavailable" else "error": value
            }
            if progress:
                print(format_peer_table({name: {str(n): report[name][str(n)]}}), file=sys.stderr)
    return report


_COLUMNS = [("ingest/s", "ingest_preembedded_per_s", "{:,.0f}"),
            ("filtered p50/p99 ms", ("query_filtered_p50_ms", "query_filtered_p99_ms"),
             "{:.2f}/{:.2f}"),
            ("unfiltered p50/p99 ms", ("query_p50_ms", "query_p99_ms"), "{:.2f}/{:.2f}"),
            ("recall@10", "recall", "{:.3f}"), ("recall unfilt.", "recall_unfiltered", "{:.3f}"),
            ("disk B/entry", "bytes_per_entry", "{:,.0f}"),
            ("RSS B/entry", "resident_bytes_per_entry", "{:,.0f}")]


def format_peer_table(systems: dict, only: Optional[Sequence[str]] = None) -> str:
    header = ["system", "entries"] + [c[0] for c in _COLUMNS]
    rows = []
    for name, per_size in systems.items():
        for size, figures in per_size.items():
            if only and size not in only:
                continue
            if "skipped" in figures or "error" in figures:
                rows.append(
                    [name, f"{int(size):,}",
                     figures.get("skipped") or figures.get("error")] + [""] * (len(_COLUMNS) - 1))
                continue
            row = [name, f"{int(size):,}"]
            for _, keys, fmt in _COLUMNS:
                keys = keys if isinstance(keys, tuple) else (keys, )
                row.append(fmt.format(*(figures[k] for k in keys)))
            rows.append(row)
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]

    def line(cells):
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths))

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _main(argv: Sequence[str]) -> int:
    """Run one system's measurement as a child process (``python -m brainmem_ros.bench.peers``).

    The child: ``python -m brainmem_ros.bench.peers NAME N VECTORS QUERIES OUT [--quiet]``.
    """
    name, n, vectors, queries, out = argv[:5]
    try:
        result = ("ok", bench_system(name, int(n), vectors, queries, progress="--quiet"
                                     not in argv))
    except PeerUnavailable as exc:
        result = ("unavailable", str(exc))
    except Exception as exc:  # reported as this system's failure; the other systems still run
        result = ("error", f"{type(exc).__name__}: {exc}")
    Path(out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
