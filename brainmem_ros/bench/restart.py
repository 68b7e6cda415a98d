"""A store reopened in a process of its own: how long it takes and what it holds in RAM.

The bench's own process holds the corpus and its vectors, so its resident memory says little about
the store's. A robot's store process is this one: it opens the store (timed, as after a reboot),
answers filtered retrievals with the model loaded, and reports what it has resident (``VmRSS``) and
the most it ever had (``VmHWM``), which a small board must have free.

Run as ``python -m brainmem_ros.bench.restart CONFIG_JSON QUERIES_NPY OUT_JSON``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from brainmem_ros.bench.footprint import status_bytes

__all__ = ["measure_restart"]


def measure_restart(config_flat: dict, queries: Sequence[str], query_vectors: np.ndarray,
                    cpus: Optional[str] = None) -> dict:
    """Open the store of ``config_flat`` in a new process (on ``cpus`` if given); its figures.

    Returns ``restart_s``, ``store_rss_bytes``, ``store_peak_rss_bytes`` and the no-embed
    retrieval p99 it measured, or ``{"error": ...}``.
    """
    with tempfile.TemporaryDirectory(prefix="brainmem-restart-") as folder:
        config_path, vectors_path, out = (Path(folder) / name for name in
                                          ("config.json", "queries.npy", "out.json"))
        config_path.write_text(json.dumps({"config": config_flat, "queries": list(queries)}))
        np.save(vectors_path, np.asarray(query_vectors, dtype=np.float32))
        command = [sys.executable, "-m", "brainmem_ros.bench.restart", str(config_path),
                   str(vectors_path), str(out)]
        if cpus:
            command = ["taskset", "-c", cpus] + command
        done = subprocess.run(command, capture_output=True, text=True)
        if not out.is_file():
            return {"error": f"exit {done.returncode}: {done.stderr[-400:].strip()}"}
        return json.loads(out.read_text())


def _main(argv: Sequence[str]) -> int:
    from brainmem_ros.bench.corpus import CORPUS_NOW
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.latency import percentile
    from brainmem_ros.core.memory import BrainMemory
    from brainmem_ros.core.retrieval import RetrievalRequest

    config_path, queries_path, out = argv[:3]
    given = json.loads(Path(config_path).read_text())
    config = MemoryConfig.from_flat(given["config"])
    query_vectors = np.load(queries_path)
    t0 = time.perf_counter()
    memory = BrainMemory(config, clock=lambda: CORPUS_NOW)
    restart_s = time.perf_counter() - t0
    memory.retrieve(RetrievalRequest("robot_a", "where is the butter now?", zones=["episodic"],
                                     top_k=5, include_working=False))  # the model, loaded
    latencies = []
    for i, question in enumerate(given["queries"]):
        request = RetrievalRequest("robot_a", question, zones=["episodic"], top_k=5,
                                   include_working=False)
        t = time.perf_counter()
        memory.retrieve(request, query_vectors=query_vectors[i:i + 1])
        latencies.append((time.perf_counter() - t) * 1000)
    figures = {"restart_s": restart_s, "store_rss_bytes": status_bytes("VmRSS"),
               "store_peak_rss_bytes": status_bytes("VmHWM"),
               "rebuilt_partitions": len(memory.store.rebuilt_partitions),
               "opened_from": memory.store.opened_from,
               "retrieve_no_embed_p99_ms": percentile(latencies, 99)}
    memory.close()
    Path(out).write_text(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
