#!/usr/bin/env python3
"""An independent rclpy client of a running memory system: latency and ingest rate.

/retrieve_memory latency over N calls with a few dozen memories, and the ingest rate through
encoder_node. Uses only the package's message and service types, nothing of its Python code.

    source scripts/env.sh
    brainmem-ros bringup --store /tmp/lat/memory.db &
    python scripts/measure_ros_latency.py --calls 200 --ingest 300
"""
import argparse
import json
import random
import statistics
import sys
import time

import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes import names
from brainmem_ros.core.latency import percentile
from brainmem_ros.msg import Observation
from brainmem_ros.srv import RetrieveMemory

OBJECTS = [
    "butter", "milk", "knife", "plate", "mug", "bread", "tomato", "lettuce", "sponge", "kettle",
    "jam", "cheese"
]
PLACES = ["fridge", "cupboard", "drawer", "counter", "table", "shelf"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default=f"lat{random.randrange(10**6)}")
    parser.add_argument("--memories", type=int, default=36)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=300)
    parser.add_argument("--json", default=None)
    parser.add_argument("--namespace", default="/", help="the stack's namespace")
    args = parser.parse_args()

    rclpy.init()
    node = rclpy.create_node("latency_client", namespace=args.namespace)
    qos = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    pub = node.create_publisher(Observation, names.OBSERVATION, qos)
    client = node.create_client(RetrieveMemory, names.RETRIEVE_MEMORY)
    if not client.wait_for_service(timeout_sec=60.0):
        print("no /retrieve_memory: start `brainmem-ros bringup` first", file=sys.stderr)
        return 1
    deadline = time.monotonic() + 30
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)

    def call(query, **kw):
        t0 = time.perf_counter()
        future = client.call_async(
            RetrieveMemory.Request(agent_id=args.agent, query=query, top_k=5, **kw))
        rclpy.spin_until_future_complete(node, future, timeout_sec=10.0)
        return future.result(), (time.perf_counter() - t0) * 1000

    def publish(text):
        pub.publish(Observation(agent_id=args.agent, text=text, confidence=1.0))

    def wait_for(word, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            answer, _ = call(word)
            if answer and any(word in m.content for m in answer.memories):
                return True
            time.sleep(0.01)
        return False

    rng = random.Random(3)
    for i in range(args.memories):
        publish(f"The {rng.choice(OBJECTS)} is in the {rng.choice(PLACES)}, seen at check {i}.")
    publish("The marker zqfirst is on the table.")
    if not wait_for("zqfirst"):
        print("observations never arrived", file=sys.stderr)
        return 1

    latencies, failures = [], 0
    for i in range(args.calls):
        # Every query is new (embedded by the store); the context, the goal, repeats as in a
        # planning loop.
        answer, ms = call(f"step {i}: where is the {OBJECTS[i % len(OBJECTS)]}?",
                          context="make a sandwich")
        failures += 0 if answer and answer.success else 1
        latencies.append(ms)

    marker = f"zqlast{random.randrange(10**6)}"
    t0 = time.perf_counter()
    for i in range(args.ingest - 1):
        publish(f"You put the {rng.choice(OBJECTS)} number {i} on the {rng.choice(PLACES)}.")
    publish(f"The marker {marker} is on the shelf.")
    ok = wait_for(marker, timeout=120)
    ingest_s = time.perf_counter() - t0

    report = {
        "agent": args.agent,
        "memories": args.memories + 1,
        "calls": args.calls,
        "failures": failures,
        "retrieve_p50_ms": statistics.median(latencies),
        "retrieve_p99_ms": percentile(latencies, 99),
        "retrieve_max_ms": max(latencies),
        "ingest_messages": args.ingest,
        "ingest_complete": ok,
        "ingest_per_s": args.ingest / ingest_s
    }
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0 if ok and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
