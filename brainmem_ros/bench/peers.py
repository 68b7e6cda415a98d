"""``brainmem-ros bench --peers``: brainmem's store against the vector stores a user could pick.

Every system gets the same kitchen memories with the same MiniLM vectors (computed once and cached)
and the same query vectors, so only the store differs. Each runs in its own process, so that its
resident memory is its own and one system's caches cannot warm another's. How each is used, as its
documentation recommends, is in ``systems``. Each system's search-time knob is swept after the
default, giving a recall/latency curve, so that no figure compares a fast low-recall setting with a
slow high-recall one.

The two queries, each top-10 by cosine similarity:

- filtered: agent ``robot_a`` and zone ``episodic`` (about 54% of the memories);
- unfiltered: the peers search the whole collection; brainmem searches every zone of ``robot_a``
  (90% of the memories), the widest query it serves, since agent isolation is never off.

Recall is measured against exact search (numpy, over the same rows each query may return).
brainmem's superseded facts are included in its answers here, as the peers know no supersession.
"""
from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from tqdm import tqdm

from brainmem_ros.bench.footprint import disk_bytes, status_bytes
from brainmem_ros.bench.systems import (FACTORIES, FILTER_AGENT, FILTER_ZONE, K, PeerUnavailable,
                                        floor_graph, tune_floor)
from brainmem_ros.core.latency import percentile

__all__ = ["PEERS", "SYSTEMS", "PeerUnavailable", "bench_system", "run_peers", "format_peer_table",
           "exact_top_k", "tie_aware_hits", "Data", "ratios", "format_ratios"]

SYSTEMS = ("brainmem", "brainmem-int8", "chromadb", "qdrant", "lancedb", "milvus", "sqlite-vec",
           "faiss")
PEERS = SYSTEMS[1:]
SMALL_ONLY = ("chromadb", "qdrant", "milvus")


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
        rss_before = status_bytes()
        system = FACTORIES[name](folder)
        batch = 1000
        every = max(batch, n // 10)
        course = []
        t0 = time.perf_counter()
        for start in tqdm(range(0, n, batch), desc=f"{name}: storing {n:,}", unit_scale=batch,
                          leave=False, disable=not progress):
            end = min(n, start + batch)
            system.insert(start, texts[start:end], data.agents[start:end], data.zones[start:end],
                          data.vectors[start:end])
            if end == n or end % every == 0:
                course.append({"rows": end, "seconds": time.perf_counter() - t0,
                               "unindexed": getattr(system, "unindexed", lambda: None)()})
        written_s = time.perf_counter() - t0
        getattr(system, "settle", lambda: None)()  # the peers index as they insert
        ingest_s = time.perf_counter() - t0
        # What exists now lives on, as in a node (nodes/runtime.py): the collector need not walk
        # the corpus again, which would bill every system's queries for the bench's objects.
        gc.collect()
        gc.freeze()
        # Written: each entry stored and answerable; the rest is an index catching up behind.
        figures: dict = {"entries": n, "ingest_preembedded_per_s": n / ingest_s,
                         "ingest_written_per_s": n / written_s, "ingest_course": course}
        # One query outside the measured ones first: a process's first search pays once for what
        # later ones find ready (pages, thread pools, lazily built structures).
        warm = data.queries.mean(axis=0)
        system.query(warm / np.linalg.norm(warm), True)
        figures.update(_queries(system, data, filtered=True))
        figures.update(_queries(system, data, filtered=False))
        curve = [{"knob": system.knobs[0], "recall": figures["recall"],
                  "p50_ms": figures["query_filtered_p50_ms"],
                  "p99_ms": figures["query_filtered_p99_ms"]}]  # the default: the figures above
        for knob in system.knobs[1:]:
            system.tune(knob)
            point = _queries(system, data, filtered=True)
            curve.append({"knob": knob, "recall": point["recall"],
                          "p50_ms": point["query_filtered_p50_ms"],
                          "p99_ms": point["query_filtered_p99_ms"]})
        figures["curve"] = curve
        figures["resident_bytes_per_entry"] = max(0, status_bytes() - rss_before) / n
        if hasattr(system, "current_rows"):  # after the resident memory: its FAISS graph not ours
            figures["current_facts"] = _current_facts(system, data)
        system.close()
        figures["bytes_per_entry"] = disk_bytes(folder) / n
        return figures
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _current_facts(system, data: Data) -> dict:
    """Time brainmem's default query (current facts only) and FAISS alone on exactly those rows.

    The peers keep every version of a fact, so the main figures include brainmem's superseded facts,
    for which it walks two graphs (current and history). What a planner asks by default walks the
    current graph alone; its floor is one FAISS graph over the same current rows, built and searched
    with the same degree and efSearch scaling. Both swept over the same knob.
    """
    rows = system.current_rows()
    vectors = np.ascontiguousarray(data.vectors[rows])
    k = min(K, len(rows))
    kth = np.sort(data.queries @ vectors.T, axis=1)[:, -k]
    graph = floor_graph(vectors)
    position = {int(r): i for i, r in enumerate(rows)}
    asks = {"brainmem": lambda v: [position[i] for i in system.query_current(v)],
            "faiss": lambda v: [int(i) for i in graph.search(v[None, :], k)[1][0] if i >= 0]}
    curves: dict = {"rows": len(rows), "brainmem": [], "faiss": []}
    for knob in system.knobs:
        system.tune(knob)
        tune_floor(graph, knob)
        for name, ask in asks.items():
            scored = []
            latencies = _timed(ask, data.queries, lambda i, vector, found: scored.append(
                tie_aware_hits(vectors[found] @ vector if found else np.zeros(0), kth[i], k)))
            hits = sum(scored)
            curves[name].append({"knob": knob, "recall": hits / (k * len(data.queries)),
                                 "p50_ms": percentile(latencies, 50),
                                 "p99_ms": percentile(latencies, 99)})
    system.tune(system.knobs[0])
    return curves


def _timed(ask, queries: np.ndarray, score) -> list[float]:
    """Ask every query in turn, each scored by ``score(i, vector, found)`` right after it.

    The milliseconds each took; scoring sits outside the timing but between the queries.
    """
    latencies = []
    for i, vector in enumerate(queries):
        t = time.perf_counter()
        found = ask(vector)
        latencies.append((time.perf_counter() - t) * 1000)
        score(i, vector, found)
    return latencies


def _queries(system, data: Data, filtered: bool) -> dict:
    """Time every query and score it against exact search; the figures under their keys."""
    prefix = "query_filtered" if filtered else "query"
    truth, kth = exact_top_k(data, data.mask(filtered, system.unfiltered_agent))
    hits, id_hits = [], []

    def score(i, vector, found):
        id_hits.append(len(truth[i] & set(found)))
        hits.append(tie_aware_hits(data.vectors[found] @ vector if found else np.zeros(0), kth[i]))

    latencies = _timed(lambda vector: system.query(vector, filtered), data.queries, score)
    hits, id_hits = sum(hits), sum(id_hits)
    expected = max(1, sum(len(t) for t in truth))
    suffix = "" if filtered else "_unfiltered"
    return {f"{prefix}_p50_ms": percentile(latencies, 50),
            f"{prefix}_p99_ms": percentile(latencies, 99), f"recall{suffix}": hits / expected,
            f"recall{suffix}_ids": id_hits / expected}


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

    ChromaDB, Qdrant and Milvus Lite are skipped above ``peer_max_size``: Qdrant's local mode
    searches by brute force and says it is not meant for more than 20,000 points, and the filtered
    queries of all three are slow enough at 100k (docs/benchmarks.md) that one run at a million
    memories would take hours.
    """
    report: dict = {name: {} for name in systems}
    for n in sizes:
        for name in systems:
            if name in SMALL_ONLY and n > peer_max_size:
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
            ("written/s", "ingest_written_per_s", "{:,.0f}"),
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
                row.append(fmt.format(*(figures[k] for k in keys))
                           if all(k in figures for k in keys) else "")
            rows.append(row)
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]

    def line(cells):
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths))

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


STORES = ("chromadb", "qdrant", "lancedb", "milvus", "sqlite-vec")  # FAISS alone is not a store


def best_setting(figures: dict, min_recall: float = 0.95) -> Optional[dict]:
    """Return the fastest swept setting (filtered p99) with recall@10 of ``min_recall`` or more."""
    points = [p for p in figures.get("curve", []) if p["recall"] >= min_recall]
    return min(points, key=lambda p: p["p99_ms"]) if points else None


def _floor_at(curve: list, recall: float) -> dict:
    """FAISS at its fastest setting as good as ``recall`` (or its best): equal recall, not knob."""
    return best_setting({"curve": curve}, recall - 0.005) or max(curve, key=lambda p: p["recall"])


def ratios(systems: dict, size: str, pipeline_p99_ms: Optional[float] = None,
           system: str = "brainmem") -> dict:
    """``system`` against the fastest store at ``size``, as the issue's ratios.

    Each store is taken at its fastest setting that reaches recall@10 0.95 (so none is beaten at a
    low-recall setting); ``system`` at its default.
    """
    ours = systems.get(system, {}).get(size, {})
    if "curve" not in ours:
        return {}
    stores = {name: (best_setting(per[size]), per[size]) for name, per in systems.items()
              if name in STORES and "curve" in per.get(size, {})}
    fit = {name: best for name, (best, _) in stores.items() if best is not None}
    out: dict = {"system": system, "p99_ms": ours["query_filtered_p99_ms"],
                 "recall": ours["recall"]}
    if fit:
        fastest = min(fit, key=lambda name: fit[name]["p99_ms"])
        out.update(fastest_store=fastest, fastest_store_p99_ms=fit[fastest]["p99_ms"],
                   fastest_store_recall=fit[fastest]["recall"],
                   p99_over_fastest_store=ours["query_filtered_p99_ms"] / fit[fastest]["p99_ms"])
        if pipeline_p99_ms is not None:
            out["pipeline_no_embed_p99_over_fastest_store"] = \
                pipeline_p99_ms / fit[fastest]["p99_ms"]
    if stores:
        quickest = max(stores, key=lambda name: stores[name][1]["ingest_preembedded_per_s"])
        out.update(fastest_ingest_store=quickest, ingest_over_fastest_store=(
            ours["ingest_preembedded_per_s"] / stores[quickest][1]["ingest_preembedded_per_s"]))
    floor = systems.get("faiss", {}).get(size, {})
    if floor.get("curve"):
        at = _floor_at(floor["curve"], ours["recall"])
        out.update(faiss_p99_ms=at["p99_ms"], faiss_recall=at["recall"],
                   p99_over_faiss=ours["query_filtered_p99_ms"] / at["p99_ms"])
    current = ours.get("current_facts")
    if current:  # the default query (current facts) against FAISS on the same rows, equal recall
        mine = current["brainmem"][0]
        at = _floor_at(current["faiss"], mine["recall"])
        out.update(current_p99_ms=mine["p99_ms"], current_recall=mine["recall"],
                   current_faiss_p99_ms=at["p99_ms"], current_faiss_recall=at["recall"],
                   current_p99_over_faiss=mine["p99_ms"] / at["p99_ms"])
    return out


def format_ratios(found: dict) -> str:
    if not found:
        return ""
    lines = [f"{found['system']}: filtered p99 {found['p99_ms']:.2f} ms,"
             f" recall {found['recall']:.3f}"]
    if "fastest_store" in found:
        lines.append(f"  fastest store at recall >= 0.95: {found['fastest_store']} "
                     f"{found['fastest_store_p99_ms']:.2f} ms (recall "
                     f"{found['fastest_store_recall']:.3f});"
                     f" ratio {found['p99_over_fastest_store']:.3f}")
    if "pipeline_no_embed_p99_over_fastest_store" in found:
        lines.append("  whole pipeline (no embedding) p99 over that store's filtered p99: "
                     f"{found['pipeline_no_embed_p99_over_fastest_store']:.3f}")
    if "p99_over_faiss" in found:
        lines.append("  p99 over FAISS alone on the same rows at recall"
                     f" {found['faiss_recall']:.3f} ({found['faiss_p99_ms']:.2f} ms):"
                     f" {found['p99_over_faiss']:.2f}")
    if "current_p99_over_faiss" in found:
        lines.append(f"  default query (current facts) p99 {found['current_p99_ms']:.2f} ms at"
                     f" recall {found['current_recall']:.3f} over FAISS alone on those rows at"
                     f" recall {found['current_faiss_recall']:.3f}"
                     f" ({found['current_faiss_p99_ms']:.2f} ms):"
                     f" {found['current_p99_over_faiss']:.2f}")
    if "ingest_over_fastest_store" in found:
        lines.append(f"  pre-embedded ingest over the fastest store's "
                     f"({found['fastest_ingest_store']}):"
                     f" {found['ingest_over_fastest_store']:.1f}x")
    return "\n".join(lines)


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
