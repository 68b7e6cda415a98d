"""``brainmem-ros loadtest``: the ROS path under load.

N client processes call ``/retrieve_memory`` for T seconds, each as fast as it gets answers (or at
``--client-rate`` calls a second, as a planner deciding at that rate would), while this process
streams observations into ``/brainmem/observation`` at R per second and probes, once a second, how
long a fresh observation takes to show up in working memory (the ingest lag). The memory nodes are
started here on a fresh store seeded with a few dozen kitchen memories, one process per node as
``ros2 launch`` starts them (``--one-process``: all in one, as plain ``brainmem-ros bringup``),
unless ``--external`` says they already run.

The measured window starts for every process at once: each client first connects and makes one
untimed call, then waits at a barrier, and the observations start streaming when the last client is
ready. Without it, the first clients called while the others were still importing rclpy (about a
second of a core each), and those start-up calls (up to 330 ms, 44 of 4,807 over 50 ms in one run)
were most of the slow calls and set the p99.

The clients' response queue is deep on purpose: a service's responses reach every client of it,
and under KEEP_LAST 10 (the ROS default for services) a client that the scheduler leaves waiting
while ten other answers arrive loses its own; with eight busy clients on two cores that happened
about once a second before the depth was raised.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median
from typing import Optional

__all__ = ["run_loadtest"]

QUERIES = ["where is the butter?", "what did I just do?", "is it safe to fill the coffee machine?",
           "where did I see the knife?", "what is in the fridge?", "how do I make a sandwich?"]
SEED_TEXTS = [f"the {thing} is on the {place}" for thing in ("butter", "knife", "mug", "tomato", "sponge", "bread")
              for place in ("counter", "shelf", "dining table", "fridge", "sink")]


CLIENT_QUEUE_DEPTH = 1000


# A probe not seen in working memory by then is counted as missed and a new one starts: a trace can
# be consolidated out of working memory between two polls, and a probe waiting for it forever
# would stop the lag from being measured for the rest of the run.
PROBE_TIMEOUT_S = 5.0
# The probe asks for the newest traces only: at 50 observations/s the one it waits for is among the
# last few, and a whole working memory (200 traces) is 10-20 ms of the store's Python per poll, a
# load of the probe's own on the calls being measured.
PROBE_TRACES = 32

RESEND_S = 2.0  # a client sends its request again after this long without an answer
RESENDS = 2
READY_TIMEOUT_S = 120.0  # for every client to connect and make its first call
TEARDOWN_TIMEOUT_S = 15.0


def _pct(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _query(i: int, index: int, novel: bool) -> str:
    """The i-th question of client ``index``. The six questions repeat, so after the first calls the
    retriever's embedding cache answers for the model; ``novel`` makes every question new text, as a
    planner asking with what it sees now does, so each call costs one model pass."""
    question = QUERIES[i % len(QUERIES)]
    return f"{question} (client {index}, step {i}: {SEED_TEXTS[(i * 7 + index) % len(SEED_TEXTS)]})" if novel \
        else question


def _wait_for_start(go: Path, timeout: float) -> Optional[float]:
    """The common start (a CLOCK_MONOTONIC time, the same in every process on the machine) once the
    load generator has written it to ``go``; None if it does not come within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if go.exists():
            return float(go.read_text())
        time.sleep(0.01)
    return None


def _worker(seconds: float, out: Path, index: int, rate: float = 0.0, novel: bool = False,
            go: Optional[Path] = None) -> int:
    """One client process: retrieve until time is up (``rate`` calls a second, 0: back to back),
    write latencies and errors. With ``go``: connect, make one untimed call, write ``<out>.ready``
    and start at the time the load generator writes to ``go``."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from brainmem_ros.srv import RetrieveMemory

    rclpy.init()
    node = rclpy.create_node(f"loadtest_client_{index}")
    # One executor holding the node for the whole run: ``rclpy.spin_until_future_complete`` adds the
    # node to the global executor and removes it again on every call, CPU the clients take from the
    # memory nodes on a small machine.
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    qos = QoSProfile(depth=CLIENT_QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    client = node.create_client(RetrieveMemory, "/retrieve_memory", qos_profile=qos)
    latencies, errors, resent, slow = [], [], [], []

    def ask(i: int) -> RetrieveMemory.Request:  # the untimed first call is the same kind of request
        return RetrieveMemory.Request(agent_id="robot", query=_query(i, index, novel), top_k=5, include_working=True,
                                      context="make a sandwich")

    started = None
    if not client.wait_for_service(timeout_sec=30.0):
        errors.append("/retrieve_memory not available")
    elif go is None:
        started = time.monotonic()
    else:
        first = client.call_async(ask(0))
        executor.spin_until_future_complete(first, timeout_sec=30.0)
        if not first.done() or not first.result().success:
            errors.append("the first (untimed) call was not answered" if not first.done() else first.result().message)
        out.with_suffix(".ready").touch()
        started = _wait_for_start(go, READY_TIMEOUT_S + 30.0)
        if started is None:
            errors.append("the load generator never gave the start")
        else:
            time.sleep(max(0.0, started - time.monotonic()))
    if started is not None:
        end = started + seconds
        i = index
        next_call = started + ((index * 0.618) % 1.0 / rate if rate > 0 else 0.0)  # clients out of step
        while time.monotonic() < end:
            if rate > 0:
                pause = next_call - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                next_call = max(next_call + 1.0 / rate, time.monotonic() - 1.0 / rate)
            i += 1
            request = ask(i)
            t0 = time.perf_counter()
            answer = None
            # A request or its response can be lost between DDS participants under many concurrent
            # clients (ros2/rcl#1163, open): a robust client sends again after RESEND_S. Each resend is
            # counted and reported; the latency includes the time lost.
            for attempt in range(1 + RESENDS):
                future = client.call_async(request)
                executor.spin_until_future_complete(future, timeout_sec=RESEND_S)
                if future.done():
                    answer = future.result()
                    break
                client.remove_pending_request(future)
                resent.append(round(time.monotonic() - started, 2))
            ms = (time.perf_counter() - t0) * 1000
            if answer is None:
                errors.append(f"no answer after {1 + RESENDS} sends of {RESEND_S:.0f} s "
                              f"(call {i - index}, {time.monotonic() - started:.1f} s in)")
            elif not answer.success:
                errors.append(answer.message)
            else:
                latencies.append(ms)
                if ms > 50.0:
                    slow.append((round(time.monotonic() - started, 2), round(ms, 1)))
    out.write_text(json.dumps({"latencies_ms": latencies, "errors": errors, "resent_at_s": resent, "slow": slow}))
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown()
    return 0


def run_loadtest(clients: int = 8, seconds: float = 60.0, rate: float = 50.0, external: bool = False,
                 config: Optional[Path] = None, json_path: Optional[Path] = None, client_rate: float = 0.0,
                 one_process: bool = False, novel_queries: bool = False) -> dict:
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from brainmem_ros.msg import MemoryEntry, Observation
    from brainmem_ros.srv import GetWorkingMemory, StoreMemory

    folder = Path(tempfile.mkdtemp(prefix="brainmem-loadtest-"))
    memory = None
    if not external:
        ready = folder / "ready"
        command = [sys.executable, "-m", "brainmem_ros.cli", "bringup", "--store", str(folder / "memory.db"),
                   "--ready-file", str(ready)] + (["--config", str(config)] if config else []) + \
                  ([] if one_process else ["--processes"])
        memory = subprocess.Popen(command, stdout=open(folder / "memory.log", "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
        deadline = time.monotonic() + 120
        while not ready.exists():
            if memory.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the memory nodes did not start; see {folder / 'memory.log'}")
            time.sleep(0.2)
    rclpy.init()
    node = rclpy.create_node("loadtest")
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
    publisher = node.create_publisher(Observation, "/brainmem/observation", qos)
    working = node.create_client(GetWorkingMemory, "/brainmem/get_working_memory")
    store = node.create_client(StoreMemory, "/brainmem/store_memory")

    def call(client, request, timeout=10.0):
        if not client.wait_for_service(timeout_sec=30.0):
            raise RuntimeError(f"{client.srv_name} not available")
        future = client.call_async(request)
        rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
        return future.result() if future.done() else None

    children = []
    teardown_hung = False
    try:
        call(store, StoreMemory.Request(entries=[MemoryEntry(agent_id="robot", zone="episodic", content=t,
                                                             importance=0.6) for t in SEED_TEXTS]), 60.0)
        deadline = time.monotonic() + 20
        while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        outs = [folder / f"client{i}.json" for i in range(clients)]
        go = folder / "go"
        children = [subprocess.Popen([sys.executable, "-m", "brainmem_ros.loadtest", "--worker", str(seconds),
                                      str(out), str(i), str(client_rate), str(int(novel_queries)), str(go)],
                                     start_new_session=True)
                    for i, out in enumerate(outs)]
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(out.with_suffix(".ready").exists() or child.poll() is not None
                      for out, child in zip(outs, children)) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        ready_at_start = sum(out.with_suffix(".ready").exists() for out in outs)
        start = time.monotonic() + 0.2  # every waiting client sees the file before then
        partial = go.with_suffix(".partial")
        partial.write_text(repr(start))
        partial.replace(go)
        pace = f"{client_rate:g} calls/s each" if client_rate > 0 else "back to back"
        nodes = "external nodes" if external else ("the memory nodes in one process" if one_process
                                                    else "one process per memory node")
        print(f"[loadtest] {clients} clients calling /retrieve_memory ({pace}) for {seconds:.0f} s, "
              f"{rate:.0f} observations/s streaming in; {nodes}", flush=True)
        time.sleep(max(0.0, start - time.monotonic()))
        published, lags, missed, next_probe, probe, next_poll = 0, [], 0, start + 2.0, None, 0.0
        period = 1.0 / rate if rate > 0 else None
        next_obs = start
        end = start + seconds
        while time.monotonic() < end:
            now = time.monotonic()
            if period and now >= next_obs:
                text = f"load observation {published}: the mug is on the counter"
                publisher.publish(Observation(agent_id="robot", text=text, source="loadtest", confidence=1.0))
                published += 1
                next_obs += period
                if probe is None and now >= next_probe:
                    probe = (text, time.perf_counter())
            if probe is not None and now >= next_poll:  # polled every 20 ms: the probe must not be the load
                next_poll = now + 0.02
                wm = call(working, GetWorkingMemory.Request(agent_id="robot", max_traces=PROBE_TRACES), 5.0)
                if wm is not None and any(t.content == probe[0] for t in wm.traces):
                    lags.append((time.perf_counter() - probe[1]) * 1000)
                    probe, next_probe = None, time.monotonic() + 1.0
                elif time.perf_counter() - probe[1] > PROBE_TIMEOUT_S:
                    missed += 1
                    probe, next_probe = None, time.monotonic() + 1.0
            rclpy.spin_once(node, timeout_sec=0.001)
            sleep = (next_obs - time.monotonic()) if period else 0.01
            if sleep > 0:
                time.sleep(min(sleep, 0.005))
        for child in children:
            child.wait(timeout=seconds + 60)
        latencies, errors, resent, slow = [], [], [], []
        for out in outs:
            data = json.loads(out.read_text()) if out.exists() else {"latencies_ms": [], "errors": ["no result"]}
            latencies += data["latencies_ms"]
            errors += data["errors"]
            resent += data.get("resent_at_s", [])
            slow += data.get("slow", [])
        report = {
            "clients": clients, "seconds": seconds, "observations_per_s": rate, "client_rate": client_rate,
            "novel_queries": novel_queries, "clients_ready_at_start": ready_at_start,
            "nodes": "external" if external else ("one process" if one_process else "one process per node"),
            "calls": len(latencies) + len(errors),
            "calls_per_s": (len(latencies) + len(errors)) / seconds, "errors": len(errors), "error_samples": errors[:5],
            "retrieve_p50_ms": _pct(latencies, 50), "retrieve_p99_ms": _pct(latencies, 99),
            "retrieve_max_ms": max(latencies) if latencies else None, "observations_published": published,
            "ingest_lag_p50_ms": median(lags) if lags else None, "ingest_lag_max_ms": max(lags) if lags else None,
            "ingest_lag_samples": len(lags), "ingest_lag_missed": missed,
            "resent_requests": len(resent), "resent_at_s": sorted(resent)[:50],
            "calls_over_50ms": len(slow), "slowest": sorted(slow, key=lambda x: -x[1])[:20],
        }
        if json_path:  # before the teardown below, which can hang
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(report, indent=1))
    finally:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
        if not _torn_down(node, rclpy, TEARDOWN_TIMEOUT_S):
            print(f"[loadtest] the DDS teardown did not finish within {TEARDOWN_TIMEOUT_S:.0f} s (a deadlock in "
                  "Fast DDS when a data writer is deleted, eProsima/Fast-DDS#6502); left to the process exit",
                  file=sys.stderr, flush=True)
            teardown_hung = True
        if memory is not None and memory.poll() is None:
            os.killpg(memory.pid, signal.SIGINT)
            try:
                memory.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(memory.pid, signal.SIGKILL)
    report["teardown_hung"] = teardown_hung
    return report


def _torn_down(node, rclpy, timeout: float) -> bool:
    """Destroy the node and shut rclpy down on a daemon thread; False if that did not finish in
    ``timeout`` (seen once, after a back-to-back run: the observation publisher's deletion waited
    forever inside Fast DDS 3.2.3), so that a finished run still reports instead of hanging."""
    finished = threading.Event()

    def teardown() -> None:
        try:
            node.destroy_node()
            rclpy.shutdown()
        finally:
            finished.set()

    threading.Thread(target=teardown, name="dds-teardown", daemon=True).start()
    return finished.wait(timeout)


def describe(report: dict) -> str:
    f = lambda v: "-" if v is None else f"{v:.1f}"
    pace = f"{report['client_rate']:g} calls/s each" if report.get("client_rate") else "back to back"
    pace += ", every question new" if report.get("novel_queries") else ", six questions repeated"
    return (f"{report['clients']} clients ({pace}) x {report['seconds']:.0f} s, "
            f"{report['observations_per_s']:.0f} obs/s, {report.get('nodes', '')}: "
            f"{report['calls']} calls ({report['calls_per_s']:.0f}/s), {report['errors']} errors, "
            f"{report['resent_requests']} requests sent again after {RESEND_S:.0f} s without an answer, "
            f"{report['calls_over_50ms']} calls over 50 ms; "
            f"{report.get('clients_ready_at_start', '-')} clients connected when the window started\n"
            f"/retrieve_memory p50 {f(report['retrieve_p50_ms'])} ms, p99 {f(report['retrieve_p99_ms'])} ms, "
            f"max {f(report['retrieve_max_ms'])} ms\n"
            f"ingest lag (observation published -> in working memory) p50 {f(report['ingest_lag_p50_ms'])} ms, "
            f"max {f(report['ingest_lag_max_ms'])} ms over {report['ingest_lag_samples']} probes "
            f"({report.get('ingest_lag_missed', 0)} not seen within {PROBE_TIMEOUT_S:.0f} s); "
            f"{report['observations_published']} observations published")


if __name__ == "__main__":  # the client processes run this module: --worker SECONDS OUT INDEX RATE NOVEL GO
    if len(sys.argv) != 8 or sys.argv[1] != "--worker":
        sys.exit("usage: brainmem-ros loadtest (this module's own entry is for its client processes)")
    sys.exit(_worker(float(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
                     sys.argv[6] == "1", Path(sys.argv[7])))
