"""``brainmem-ros bench``: the memory core's speed and footprint as the store grows.

For each size: build a store of that many kitchen memories from cached real embeddings (this is the
pre-embedded ingest figure), then measure retrieval through the full pipeline with and without the
query embedding (agent and zone filters applied), vector recall@10 against exact search, ingest
through encoding (embedding included) and consolidation, a consolidation pass, a forgetting pass,
bytes on disk and resident memory per entry.
"""
from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from tqdm import tqdm

from brainmem_ros.bench.footprint import disk_bytes, status_bytes
from brainmem_ros.bench.peers import tie_aware_hits
from brainmem_ros.bench.restart import measure_restart
from brainmem_ros.core.store.snapshot import SNAPSHOT_DIR
from brainmem_ros.bench.corpus import (CORPUS_NOW, cached_embeddings, embedding_cache_path,
                                       make_corpus, make_questions)
from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.embedding import BACKENDS, Embedder, MiniLMEmbedder
from brainmem_ros.core.encoding import Event
from brainmem_ros.core.memory import BrainMemory
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import Entry, TraceKind, Zone
from brainmem_ros.core.latency import percentile

__all__ = ["run_bench", "format_table", "DEFAULT_SIZES"]

DEFAULT_SIZES = (1000, 10000, 100000)
CACHE = Path(os.environ.get("BRAINMEM_CACHE", Path.home() / ".cache" / "brainmem_ros")) / "bench"


# The first retrieval of each timed loop, kept out of its percentiles: not among make_questions'
# forms, so never one of the measured questions (nor served from the query-embedding cache).
FIRST_QUESTIONS = ("what was the last thing I left on the shelf?",
                   "which drawer did I open before the timer rang?")


def _corpus_clock() -> float:
    return CORPUS_NOW


def bench_size(n: int, embedder: Embedder, queries: list[str], query_vectors: np.ndarray,
               config: MemoryConfig, progress: bool, cache_dir: Path,
               restart_cpus: str = "0") -> dict:
    corpus = make_corpus(n)
    vectors = cached_embeddings([c.text for c in corpus], embedder.embed, cache_dir,
                                label=f"embedding {n:,} memories (cached after)", progress=progress,
                                model_name=embedder.name)
    folder = Path(tempfile.mkdtemp(prefix=f"brainmem-bench-{n}-"))
    # The corpus is the bench's, not the store's: frozen, so that the collector's passes over it are
    # not billed to ingest (as a node freezes what exists once it has started, nodes/runtime.py).
    gc.collect()
    gc.freeze()
    try:
        rss_before = status_bytes()
        memory = BrainMemory(config.replace(**{"store.path": str(folder / "memory.db")}),
                             embedder=embedder, clock=_corpus_clock)
        batch = 1000
        ingest_s = 0.0
        for start in tqdm(range(0, n, batch), desc=f"storing {n:,}", unit_scale=batch,
                          disable=not progress, leave=False):
            entries = [
                Entry(c.agent_id, c.zone, c.text, vectors[i], importance=0.5, created=c.created,
                      last_access=c.created)
                for i, c in enumerate(corpus[start:start + batch], start)
            ]
            t0 = time.perf_counter()
            memory.store_entries(entries)
            ingest_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        memory.store.wait_indexed()  # sustained throughput: until the graphs hold every row
        ingest_s += time.perf_counter() - t0
        rss_after = status_bytes()
        # As a node does once started (nodes/runtime.py): what exists now lives on, so the collector
        # is kept from walking it; the corpus built above would otherwise be billed to retrieval.
        del entries
        gc.unfreeze()
        gc.collect()
        gc.freeze()

        zones = [Zone.EPISODIC.value]
        exact_hits, approx_hits, approx_id_hits = 0, 0, 0
        for qv in query_vectors:
            exact = memory.store.vector_search(qv, "robot_a", [Zone.EPISODIC], 10, exact=True)
            approx = memory.store.vector_search(qv, "robot_a", [Zone.EPISODIC], 10)
            exact_hits += len(exact)
            approx_id_hits += len({r for r, _ in exact} & {r for r, _ in approx})
            if exact:
                approx_hits += tie_aware_hits(np.array([s for _, s in approx]), exact[-1][1],
                                              len(exact))
        filtered_vector_ms = []
        for qv in query_vectors:
            t0 = time.perf_counter()
            memory.store.vector_search(qv, "robot_a", [Zone.EPISODIC], 10)
            filtered_vector_ms.append((time.perf_counter() - t0) * 1000)

        # Two separate loops: ONNX Runtime's worker threads spin for a moment after each model call,
        # which would bill the pipeline-only figure for the model's idle time if the calls
        # alternated. Each opens with a question outside the measured set, timed on its own: the
        # first retrieval of a process pays once for what later ones find ready (SQLite pages,
        # expressions compiled on first use, the model's first run), and the percentiles describe
        # the calls a planner makes all day.
        with_embed, without_embed = [], []
        requests = [
            RetrievalRequest("robot_a", q, zones=zones, top_k=5, include_working=False)
            for q in queries
        ]
        first = [
            RetrievalRequest("robot_a", q, zones=zones, top_k=5, include_working=False)
            for q in FIRST_QUESTIONS
        ]
        first_vector = embedder.embed([first[0].query])
        t0 = time.perf_counter()
        memory.retrieve(first[0], query_vectors=first_vector)
        first_no_embed_ms = (time.perf_counter() - t0) * 1000
        for i, request in enumerate(requests):
            t0 = time.perf_counter()
            memory.retrieve(request, query_vectors=query_vectors[i:i + 1])
            without_embed.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        memory.retrieve(first[1])
        first_ms = (time.perf_counter() - t0) * 1000
        for request in tqdm(requests, desc=f"retrieving at {n:,}", disable=not progress,
                            leave=False):
            t0 = time.perf_counter()
            memory.retrieve(request)
            with_embed.append((time.perf_counter() - t0) * 1000)
        all_zone_ms = []
        for i, q in enumerate(queries[:100]):
            t0 = time.perf_counter()
            memory.retrieve(RetrievalRequest("robot_a", q, top_k=5),
                            query_vectors=query_vectors[i:i + 1])
            all_zone_ms.append((time.perf_counter() - t0) * 1000)

        fresh = make_corpus(2000, seed=99)
        events = [Event("robot_c", TraceKind.OBSERVATION, c.text) for c in fresh]
        t0 = time.perf_counter()
        for start in range(0, len(events), 64):
            memory.encode(events[start:start + 64])
        memory.consolidate("robot_c")
        ingest_embed_s = time.perf_counter() - t0

        wm_events = [
            Event("robot_a", TraceKind.OBSERVATION, c.text) for c in make_corpus(200, seed=5)
        ]
        memory.encode(wm_events)
        t0 = time.perf_counter()
        consolidation = memory.consolidate("robot_a")
        consolidate_s = time.perf_counter() - t0

        forgetting = memory.forget(decay=True)
        memory.close()
        disk = disk_bytes(folder)
        # Restart: open the store again as a node would after a crash or a reboot, in a process of
        # its own: with the saved vector index, on one core too, then with it deleted.
        stored = config.replace(**{"store.path": str(folder / "memory.db")})
        if getattr(embedder, "backend", "") in BACKENDS:  # the store answers only its own model
            stored = stored.replace(**{"embedding.backend": embedder.backend})
        stored = stored.flat()
        with_graphs = measure_restart(stored, queries, query_vectors)
        one_core = measure_restart(stored, queries, query_vectors, cpus=restart_cpus)
        # As after a crash: first with the graphs saved but no RAM snapshot, then with neither.
        shutil.rmtree(folder / "memory.db.index" / SNAPSHOT_DIR, ignore_errors=True)
        no_snapshot = measure_restart(stored, queries, query_vectors)
        shutil.rmtree(folder / "memory.db.index", ignore_errors=True)
        rebuilt = measure_restart(stored, queries, query_vectors)
        nan = float("nan")
        restart = {"restart_s": with_graphs.get("restart_s", nan),
                   "restart_no_snapshot_s": no_snapshot.get("restart_s", nan),
                   "restart_rebuild_s": rebuilt.get("restart_s", nan),
                   "store_rss_mb": with_graphs.get("store_rss_bytes", nan) / 2**20,
                   "store_peak_rss_mb": with_graphs.get("store_peak_rss_bytes", nan) / 2**20,
                   "restart": with_graphs, "restart_one_core": one_core,
                   "restart_no_snapshot": no_snapshot,
                   "restart_rebuild": rebuilt}
        return {
            "entries": n,
            "retrieve_p50_ms": percentile(with_embed, 50),
            "retrieve_p99_ms": percentile(with_embed, 99),
            "retrieve_no_embed_p50_ms": percentile(without_embed, 50),
            "retrieve_no_embed_p99_ms": percentile(without_embed, 99),
            "retrieve_first_ms": first_ms,
            "retrieve_no_embed_first_ms": first_no_embed_ms,
            "retrieve_all_zones_no_embed_p99_ms": percentile(all_zone_ms, 99),
            "vector_filtered_p50_ms": percentile(filtered_vector_ms, 50),
            "vector_filtered_p99_ms": percentile(filtered_vector_ms, 99),
            "recall_at_10": approx_hits / max(1, exact_hits),
            "recall_at_10_ids": approx_id_hits / max(1, exact_hits),
            "ingest_per_s": len(events) / ingest_embed_s,
            "ingest_preembedded_per_s": n / ingest_s,
            "consolidation_pass_s": consolidate_s,
            "consolidation_promoted": consolidation.promoted,
            "forget_pass_s": forgetting.seconds,
            "forget_archived": forgetting.archived,
            "bytes_per_entry": disk / n,
            "resident_bytes_per_entry": max(0, rss_after - rss_before) / n,
            **restart,
        }
    finally:
        gc.unfreeze()
        shutil.rmtree(folder, ignore_errors=True)


def run_bench(sizes: Sequence[int] = DEFAULT_SIZES, n_queries: int = 200,
              json_path: Optional[Path] = None, embedder: Optional[Embedder] = None,
              config: Optional[MemoryConfig] = None, progress: bool = True, cache_dir: Path = CACHE,
              peers: Sequence[str] = (), peer_max_size: int = 100000) -> dict:
    """Measure the memory core at each store size and write the report.

    ``peers``: also run ``bench.peers`` for brainmem and these stores on the same vectors
    (``systems.<name>.<N>`` in the report).
    """
    embedder = embedder or MiniLMEmbedder()
    # Consolidation runs only when the bench asks for it, so the pass it times has work to do.
    config = (config or MemoryConfig()).replace(**{"consolidation.every_n_traces": 0})
    queries = make_questions(n_queries)
    query_vectors = cached_embeddings(queries, embedder.embed, cache_dir, label="embedding queries",
                                      progress=progress, model_name=embedder.name)
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0]
        },
        "embedder": getattr(embedder, "name",
                            type(embedder).__name__),
        "embedding_backend": getattr(embedder, "backend", ""),
        "queries": n_queries,
        "filters": {
            "agent": "robot_a",
            "zones": ["episodic"]
        },
        "config": config.flat(),
        "sizes": {},
    }
    for n in sizes:
        report["sizes"][str(n)] = bench_size(n, embedder, queries, query_vectors, config, progress,
                                             cache_dir)
        if progress:
            print(format_table(report, only=[str(n)]), file=sys.stderr)
    if peers:
        from brainmem_ros.bench.peers import ratios, run_peers

        report["systems"] = {}
        for n in sizes:
            vectors = embedding_cache_path([c.text for c in make_corpus(n)], cache_dir,
                                           embedder.name)
            questions = embedding_cache_path(queries, cache_dir, embedder.name)
            for name, figures in run_peers([n], ["brainmem", *peers], vectors, questions, progress,
                                           peer_max_size).items():
                report["systems"].setdefault(name, {}).update(figures)
        report["ratios"] = {}
        for n in sizes:
            pipeline = report["sizes"][str(n)]["retrieve_no_embed_p99_ms"]
            found = (ratios(report["systems"], str(n), pipeline, system)
                     for system in ("brainmem", "brainmem-int8"))
            report["ratios"][str(n)] = [f for f in found if f]
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
    return report


_COLUMNS = [
    ("entries", "entries", "{:,.0f}"),
    ("retrieve p50/p99 ms", ("retrieve_p50_ms", "retrieve_p99_ms"), "{:.2f}/{:.2f}"),
    ("no-embed p50/p99 ms", ("retrieve_no_embed_p50_ms", "retrieve_no_embed_p99_ms"),
     "{:.2f}/{:.2f}"),
    ("vector p99 ms", "vector_filtered_p99_ms", "{:.2f}"),
    ("recall@10", "recall_at_10", "{:.3f}"),
    ("ingest/s", "ingest_per_s", "{:,.0f}"),
    ("pre-embedded/s", "ingest_preembedded_per_s", "{:,.0f}"),
    ("consolidate s", "consolidation_pass_s", "{:.3f}"),
    ("forget s", "forget_pass_s", "{:.3f}"),
    ("disk B/entry", "bytes_per_entry", "{:,.0f}"),
    ("restart s", "restart_s", "{:.2f}"),
    ("store RSS MB", "store_rss_mb", "{:,.0f}"),
]


def format_table(report: dict, only: Optional[Sequence[str]] = None) -> str:
    header = [name for name, _, _ in _COLUMNS]
    rows = []
    for size, figures in report["sizes"].items():
        if only and size not in only:
            continue
        row = []
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
