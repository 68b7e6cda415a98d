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
ready. Without it, the first clients would call while the others are still importing rclpy, and
those start-up calls would be most of the slow calls and set the p99.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from brainmem_ros.bringup.run import stop_process_groups
from brainmem_ros.nodes import names
from brainmem_ros.core.latency import percentile
from brainmem_ros.loadtest.client import CLIENT_QUEUE_DEPTH, READY_TIMEOUT_S, RESEND_S, SEED_TEXTS

__all__ = ["run_loadtest", "describe"]

# A probe not seen in working memory by then is counted as missed and a new one starts: a trace can
# be consolidated out of working memory between two polls, and a probe waiting for it forever
# would stop the lag from being measured for the rest of the run.
PROBE_TIMEOUT_S = 5.0
# The probe asks for the newest traces only: at 50 observations/s the one it waits for is among the
# last few, and building a whole working memory per poll would be a load of the probe's own on the
# calls being measured.
PROBE_TRACES = 32

TEARDOWN_TIMEOUT_S = 15.0


def run_loadtest(clients: int = 8, seconds: float = 60.0, rate: float = 50.0,
                 external: bool = False, config: Optional[Path] = None,
                 json_path: Optional[Path] = None, client_rate: float = 0.0,
                 one_process: bool = False, novel_queries: bool = False,
                 namespace: str = "") -> dict:
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from brainmem_ros.msg import MemoryEntry, Observation
    from brainmem_ros.srv import GetWorkingMemory, StoreMemory

    folder = Path(tempfile.mkdtemp(prefix="brainmem-loadtest-"))
    memory = None
    if not external:
        ready = folder / "ready"
        command = [sys.executable, "-m", "brainmem_ros.cli", "bringup",
                   "--store", str(folder / "memory.db"),
                   "--ready-file", str(ready)]
        command += ["--config", str(config)] if config else []
        command += ["--one-process"] if one_process else []
        command += ["--namespace", namespace] if namespace else []
        memory = subprocess.Popen(command, stdout=open(folder / "memory.log", "w"),
                                  stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while not ready.exists():
            if memory.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the memory nodes did not start; see {folder / 'memory.log'}")
            time.sleep(0.2)
    rclpy.init()
    node = rclpy.create_node("loadtest", namespace=namespace or "/")
    qos = QoSProfile(depth=CLIENT_QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    publisher = node.create_publisher(Observation, names.OBSERVATION, qos)
    working = node.create_client(GetWorkingMemory, names.GET_WORKING_MEMORY)
    store = node.create_client(StoreMemory, names.STORE_MEMORY)

    def call(client, request, timeout=10.0):
        if not client.wait_for_service(timeout_sec=30.0):
            raise RuntimeError(f"{client.srv_name} not available")
        future = client.call_async(request)
        rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
        return future.result() if future.done() else None

    children = []
    teardown_hung = False
    try:
        call(
            store,
            StoreMemory.Request(entries=[
                MemoryEntry(agent_id="robot", zone="episodic", content=t, importance=0.6)
                for t in SEED_TEXTS
            ]), 60.0)
        deadline = time.monotonic() + 20
        while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        outs = [folder / f"client{i}.json" for i in range(clients)]
        go = folder / "go"
        children = [
            subprocess.Popen([
                sys.executable, "-m", "brainmem_ros.loadtest.client", "--worker",
                str(seconds),
                str(out),
                str(i),
                str(client_rate),
                str(int(novel_queries)),
                str(go),
                namespace or "/"
            ], start_new_session=True) for i, out in enumerate(outs)
        ]
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(
                out.with_suffix(".ready").exists() or child.poll() is not None
                for out, child in zip(outs, children)) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        ready_at_start = sum(out.with_suffix(".ready").exists() for out in outs)
        start = time.monotonic() + 0.2  # every waiting client sees the file before then
        partial = go.with_suffix(".partial")
        partial.write_text(repr(start))
        partial.replace(go)
        pace = f"{client_rate:g} calls/s each" if client_rate > 0 else "back to back"
        nodes = "external nodes" if external else (
            "the memory nodes in one process" if one_process else "one process per memory node")
        print(
            f"[loadtest] {clients} clients calling /retrieve_memory ({pace}) for {seconds:.0f} s, "
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
                publisher.publish(
                    Observation(agent_id="robot", text=text, source="loadtest", confidence=1.0))
                published += 1
                next_obs += period
                if probe is None and now >= next_probe:
                    probe = (text, time.perf_counter())
            # polled every 20 ms: the probe must not be the load
            if probe is not None and now >= next_poll:
                next_poll = now + 0.02
                wm = call(working,
                          GetWorkingMemory.Request(agent_id="robot", max_traces=PROBE_TRACES), 5.0)
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
            data = json.loads(out.read_text()) if out.exists() else {
                "latencies_ms": [],
                "errors": ["no result"]
            }
            latencies += data["latencies_ms"]
            errors += data["errors"]
            resent += data.get("resent_at_s", [])
            slow += data.get("slow", [])
        report = {
            "clients": clients,
            "seconds": seconds,
            "observations_per_s": rate,
            "client_rate": client_rate,
            "novel_queries": novel_queries,
            "clients_ready_at_start": ready_at_start,
            "nodes": "external" if external else
            ("one process" if one_process else "one process per node"),
            "calls": len(latencies) + len(errors),
            "calls_per_s": (len(latencies) + len(errors)) / seconds,
            "errors": len(errors),
            "error_samples": errors[:5],
            "retrieve_p50_ms": percentile(latencies, 50),
            "retrieve_p99_ms": percentile(latencies, 99),
            "retrieve_max_ms": max(latencies) if latencies else None,
            "observations_published": published,
            "ingest_lag_p50_ms": percentile(lags, 50),
            "ingest_lag_max_ms": max(lags) if lags else None,
            "ingest_lag_samples": len(lags),
            "ingest_lag_missed": missed,
            "resent_requests": len(resent),
            "resent_at_s": sorted(resent)[:50],
            "calls_over_50ms": len(slow),
            "slowest": sorted(slow, key=lambda x: -x[1])[:20],
        }
        if json_path:  # before the teardown below, which can hang
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(report, indent=1))
    finally:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
        if not _torn_down(node, rclpy, TEARDOWN_TIMEOUT_S):
            print(
                f"[loadtest] the DDS teardown did not finish within {TEARDOWN_TIMEOUT_S:.0f} s (a "
                "deadlock in "
                "Fast DDS when a data writer is deleted, eProsima/Fast-DDS#6502); left to the "
                "process exit", file=sys.stderr, flush=True)
            teardown_hung = True
        if memory is not None:
            stop_process_groups([memory])
        shutil.rmtree(folder, ignore_errors=True)  # kept only when the nodes did not start (log)
    report["teardown_hung"] = teardown_hung
    return report


def _torn_down(node, rclpy, timeout: float) -> bool:
    """Destroy the node and shut rclpy down, giving up after ``timeout`` (False).

    Seen once, after a back-to-back run: the observation publisher's deletion waited forever inside
    Fast DDS 3.2.3; a finished run still reports instead of hanging.
    """
    from brainmem_ros.nodes.runtime import finished_within

    def teardown() -> None:
        node.destroy_node()
        rclpy.shutdown()

    return finished_within(teardown, timeout)


def describe(report: dict) -> str:
    def f(v):
        return "-" if v is None else f"{v:.1f}"

    pace = f"{report['client_rate']:g} calls/s each" if report.get(
        "client_rate") else "back to back"
    pace += ", every question new" if report.get("novel_queries") else ", six questions repeated"
    return (
        f"{report['clients']} clients ({pace}) x {report['seconds']:.0f} s, "
        f"{report['observations_per_s']:.0f} obs/s, {report.get('nodes', '')}: "
        f"{report['calls']} calls ({report['calls_per_s']:.0f}/s), {report['errors']} errors, "
        f"{report['resent_requests']} requests sent again after {RESEND_S:.0f} s without an "
        "answer, "
        f"{report['calls_over_50ms']} calls over 50 ms; "
        f"{report.get('clients_ready_at_start', '-')} clients connected when the window started\n"
        f"/retrieve_memory p50 {f(report['retrieve_p50_ms'])} ms, p99 "
        f"{f(report['retrieve_p99_ms'])} ms, "
        f"max {f(report['retrieve_max_ms'])} ms\n"
        "ingest lag (observation published -> in working memory) p50 "
        f"{f(report['ingest_lag_p50_ms'])} ms, "
        f"max {f(report['ingest_lag_max_ms'])} ms over {report['ingest_lag_samples']} probes "
        f"({report.get('ingest_lag_missed', 0)} not seen within {PROBE_TIMEOUT_S:.0f} s); "
        f"{report['observations_published']} observations published")
