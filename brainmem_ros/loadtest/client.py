"""One client process of ``brainmem-ros loadtest``: it asks ``/retrieve_memory`` until time is up.

Run by the load generator as ``python -m brainmem_ros.loadtest.client --worker SECONDS OUT INDEX
RATE NOVEL GO NAMESPACE``. The clients' response queue is deep on purpose: a service's responses
reach every client of it, and under KEEP_LAST 10 (the ROS default for services) a client that the
scheduler leaves waiting while ten other answers arrive loses its own.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional
from brainmem_ros.nodes import names

__all__ = ["QUERIES", "SEED_TEXTS", "CLIENT_QUEUE_DEPTH", "RESEND_S", "RESENDS", "READY_TIMEOUT_S"]

QUERIES = [
    "where is the butter?", "what did I just do?", "is it safe to fill the coffee machine?",
    "where did I see the knife?", "what is in the fridge?", "how do I make a sandwich?"
]
SEED_TEXTS = [
    f"the {thing} is on the {place}"
    for thing in ("butter", "knife", "mug", "tomato", "sponge", "bread")
    for place in ("counter", "shelf", "dining table", "fridge", "sink")
]
CLIENT_QUEUE_DEPTH = 1000
RESEND_S = 2.0  # a client sends its request again after this long without an answer
RESENDS = 2
READY_TIMEOUT_S = 120.0  # for every client to connect and make its first call


def _query(i: int, index: int, novel: bool) -> str:
    """Return the i-th question of client ``index``.

    The i-th question of client ``index``. The six questions repeat, so after the first calls the
    retriever's embedding cache answers for the model; ``novel`` makes every question new text, as a
    planner asking with what it sees now does, so each call costs one model pass.
    """
    question = QUERIES[i % len(QUERIES)]
    if not novel:
        return question
    return f"{question} (client {index}, step {i}: {SEED_TEXTS[(i * 7 + index) % len(SEED_TEXTS)]})"


def _wait_for_start(go: Path, timeout: float) -> Optional[float]:
    """Wait for the common start the load generator writes to ``go``.

    The common start (a CLOCK_MONOTONIC time, the same in every process on the machine) once the
    load generator has written it to ``go``; None if it does not come within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if go.exists():
            return float(go.read_text())
        time.sleep(0.01)
    return None


def _worker(seconds: float, out: Path, index: int, rate: float = 0.0, novel: bool = False,
            go: Optional[Path] = None, namespace: str = "/") -> int:
    """Run one client process: retrieve until time is up, write latencies and errors.

    One client process: retrieve until time is up (``rate`` calls a second, 0: back to back), write
    latencies and errors. With ``go``: connect, make one untimed call, write ``<out>.ready`` and
    start at the time the load generator writes to ``go``.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from brainmem_ros.srv import RetrieveMemory

    rclpy.init()
    node = rclpy.create_node(f"loadtest_client_{index}", namespace=namespace)
    # One executor holding the node for the whole run: ``rclpy.spin_until_future_complete`` adds the
    # node to the global executor and removes it again on every call, CPU the clients take from the
    # memory nodes on a small machine.
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    qos = QoSProfile(depth=CLIENT_QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    client = node.create_client(RetrieveMemory, names.RETRIEVE_MEMORY, qos_profile=qos)
    latencies, errors, resent, slow = [], [], [], []

    def ask(i: int) -> RetrieveMemory.Request:  # the untimed first call is the same kind of request
        return RetrieveMemory.Request(agent_id="robot", query=_query(i, index, novel), top_k=5,
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
            errors.append("the first (untimed) call was not answered"
                          if not first.done() else first.result().message)
        out.with_suffix(".ready").touch()
        started = _wait_for_start(go, READY_TIMEOUT_S + 30.0)
        if started is None:
            errors.append("the load generator never gave the start")
        else:
            time.sleep(max(0.0, started - time.monotonic()))
    if started is not None:
        end = started + seconds
        i = index
        next_call = started + (
            (index * 0.618) % 1.0 / rate if rate > 0 else 0.0)  # clients out of step
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
            # clients (ros2/rcl#1163, open): a robust client sends again after RESEND_S. Each resend
            # is counted and reported; the latency includes the time lost.
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
    out.write_text(
        json.dumps({
            "latencies_ms": latencies,
            "errors": errors,
            "resent_at_s": resent,
            "slow": slow
        }))
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown()
    return 0


# the client processes run this module: --worker SECONDS OUT INDEX RATE NOVEL GO NAMESPACE
if __name__ == "__main__":
    if len(sys.argv) != 9 or sys.argv[1] != "--worker":
        sys.exit(
            "usage: brainmem-ros loadtest (this module's own entry is for its client processes)")
    sys.exit(
        _worker(float(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
                sys.argv[6] == "1", Path(sys.argv[7]), sys.argv[8]))
