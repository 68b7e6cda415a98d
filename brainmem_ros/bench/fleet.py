"""``brainmem-ros bench --fleet N``: N robots sharing a corpus through one PostgreSQL server.

The bench's corpus (real all-MiniLM-L6-v2 vectors, cached) is dealt out to N robots, each with its
own store and role on a server started for the run (``fleet-db``); every kind of memory is shared.
Measured, in this order: each robot storing its part (the outbox written in the same
transactions); all robots pushing at once; the server's bytes per memory; one robot's retrieval
(the whole pipeline, the question's vector given) on its own memories; all robots pulling the
others' at once; the same robot's retrieval again with the fleet's memories in its store, once
their vector graphs are built (a robot builds them in the background while it serves); then
the sync lag while one robot keeps learning and every robot runs its rounds every
``LAG_PERIOD_S``.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from brainmem_ros.bench.corpus import cached_embeddings, make_corpus, make_questions
from brainmem_ros.core.fleet.policy import KINDS
from brainmem_ros.core.latency import percentile
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import Entry, Zone

__all__ = ["bench_fleet", "format_fleet"]

LAG_PERIOD_S = 0.2  # how often each robot runs a round in the lag phase
LAG_RATE_HZ = 20.0  # memories the learning robot stores per second in the lag phase
LAG_SECONDS = 15.0


def _timed(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _all_at_once(robots, task) -> float:
    """Run ``task(robot)`` on a thread per robot; the wall time until the last one finished."""
    errors: list[BaseException] = []

    def run(robot):
        try:
            task(robot)
        except BaseException as exc:  # noqa: BLE001 - reported below, after every thread ended
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r, )) for r in robots]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def _retrieval_ms(memory, questions, vectors) -> dict:
    times = []
    for text, vector in zip(questions, vectors):
        started = time.perf_counter()
        memory.retrieve(RetrievalRequest("robot_a", text), query_vectors=vector[None, :])
        times.append((time.perf_counter() - started) * 1000.0)
    return {"p50": percentile(times, 50), "p99": percentile(times, 99)}


def bench_fleet(robots: int, total: int, embedder, config, n_queries: int = 200,
                cache_dir: Optional[Path] = None, progress: bool = True) -> dict:
    from brainmem_ros.bench.core import CACHE
    from brainmem_ros.bringup import fleet_db
    from brainmem_ros.core.memory import BrainMemory

    import psycopg

    say = (lambda text: print(f"[fleet bench] {text}", file=sys.stderr, flush=True)) \
        if progress else (lambda text: None)
    cache_dir = cache_dir or CACHE
    corpus = make_corpus(total)
    vectors = cached_embeddings([c.text for c in corpus], embedder.embed, cache_dir,
                                label=f"embedding {total:,} memories", progress=progress,
                                model_name=embedder.name)
    questions = make_questions(n_queries)
    question_vectors = cached_embeddings(questions, embedder.embed, cache_dir,
                                         label="embedding queries", progress=progress,
                                         model_name=embedder.name)
    server = Path(tempfile.mkdtemp(prefix="brainmem-fleet-bench-"))
    folder = Path(tempfile.mkdtemp(prefix="brainmem-fleet-stores-"))
    memories = []
    try:
        fleet_db.start(server)
        for i in range(robots):
            memories.append(BrainMemory(config.replace(**{
                "store.path": str(folder / f"robot{i + 1}.db"),
                "fleet.dsn": fleet_db.add_robot_dsn(server, f"robot{i + 1}"),
                "fleet.kinds": list(KINDS),
                "fleet.period_s": 3600.0, "fleet.batch": 2000,
                "consolidation.every_n_traces": 0}), embedder, clock=time.time))
        now = time.time()
        span = 30 * 86400.0
        parts = [[] for _ in range(robots)]
        for i, (item, vector) in enumerate(zip(corpus, vectors)):
            parts[i % robots].append(Entry(item.agent_id, item.zone, item.text, vector,
                                           importance=0.5,
                                           created=now - span * (1 - i / max(1, total))))
        say(f"{robots} robots store {total:,} memories, each its part")
        store_s = _all_at_once(
            list(zip(memories, parts)),
            lambda pair: [pair[0].store.add(pair[1][s:s + 1000])
                          for s in range(0, len(pair[1]), 1000)])
        say("all push at once")
        push_s = _all_at_once(memories, lambda m: m.fleet.round(pull=False))
        with psycopg.connect(fleet_db.dsn_for(server, fleet_db.ADMIN)) as admin:
            disk, rows = admin.execute(
                "SELECT pg_total_relation_size('memories'), COUNT(*) FROM memories").fetchone()
        say("one robot's retrieval on its own memories")
        alone = _retrieval_ms(memories[0], questions, question_vectors)
        say("all pull at once")
        pull_s = _all_at_once(memories, lambda m: m.fleet.round())
        pulled = sum(m.fleet.counts["stored"] for m in memories)
        say("the pulled memories' graphs are built (in the background, as on a robot)")
        index_s = _all_at_once(memories, lambda m: m.store.wait_indexed())
        with_fleet = _retrieval_ms(memories[0], questions, question_vectors)
        say(f"sync lag while robot1 learns {LAG_RATE_HZ:g} memories/s for {LAG_SECONDS:g} s")
        lags = _lag_phase(memories, embedder)
    finally:
        for memory in memories:
            memory.close()
        try:
            fleet_db.stop(server)
        except Exception:  # noqa: BLE001 - the figures are taken; the folders go anyway
            pass
        shutil.rmtree(server, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "robots": robots, "memories": total, "machine": {"cpus": os.cpu_count()},
        "store_per_s": total / store_s,
        "push_per_s": total / push_s,
        "pull_applied_per_s": pulled / pull_s, "pulled": pulled, "graphs_built_s": index_s,
        "server_bytes_per_memory": disk / max(1, rows), "server_rows": rows,
        "retrieve_own_ms": alone, "retrieve_with_fleet_ms": with_fleet,
        "store_sizes": {"own": total // robots, "with_fleet": total},
        "sync_lag_p50_s": percentile(lags, 50), "sync_lag_p99_s": percentile(lags, 99),
        "sync_lag_samples": len(lags),
    }


def _lag_phase(memories, embedder) -> list[float]:
    for m in memories:
        m.fleet.lags.clear()
    stop = threading.Event()

    def rounds(memory):
        while not stop.is_set():
            memory.fleet.round()
            stop.wait(LAG_PERIOD_S)

    threads = [threading.Thread(target=rounds, args=(m, )) for m in memories]
    for t in threads:
        t.start()
    learner = memories[0]
    texts = [f"the parcel {i} was left at door {i % 37}"
             for i in range(int(LAG_RATE_HZ * LAG_SECONDS))]
    vectors = embedder.embed(texts)
    for text, vector in zip(texts, vectors):
        learner.store.add([Entry("robot_a", Zone.SEMANTIC, text, vector)])
        time.sleep(1.0 / LAG_RATE_HZ)
    time.sleep(3 * LAG_PERIOD_S)
    stop.set()
    for t in threads:
        t.join()
    return [lag for m in memories[1:] for lag in m.fleet.lags]


def format_fleet(r: dict) -> str:
    own, fleet = r["retrieve_own_ms"], r["retrieve_with_fleet_ms"]
    return "\n".join([
        f"{r['robots']} robots, {r['memories']:,} shared memories ({r['machine']['cpus']} cores)",
        f"  stored (outbox in the same transaction)  {r['store_per_s']:,.0f}/s",
        f"  pushed, all robots at once               {r['push_per_s']:,.0f}/s",
        f"  pulled and applied, all robots at once   {r['pull_applied_per_s']:,.0f}/s "
        f"({r['pulled']:,} memories)",
        f"  server disk per memory                   {r['server_bytes_per_memory']:,.0f} B",
        f"  retrieval p50/p99, own {r['store_sizes']['own']:,}           "
        f"{own['p50']:.2f}/{own['p99']:.2f} ms",
        f"  retrieval p50/p99, with the fleet's {r['store_sizes']['with_fleet']:,}  "
        f"{fleet['p50']:.2f}/{fleet['p99']:.2f} ms "
        f"({fleet['p99'] / own['p99']:.2f}x at p99)",
        f"  sync lag p50/p99                          {r['sync_lag_p50_s']:.2f}/"
        f"{r['sync_lag_p99_s']:.2f} s ({r['sync_lag_samples']} samples)",
    ])
