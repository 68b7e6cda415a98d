"""``brainmem-ros demo``: the main job, and a recorded-run walkthrough.

``run_demo()`` (the default, ``make demo``): the memory nodes, ``kitchen_sim_node`` and a
``planner_node`` per condition as separate processes talking over DDS, on the embedded default
store; a few kitchen episodes with interruptions under ``window``, ``brainmem`` and ``full``; a
table, a JSON report and a plot.

``run_bag_demo()`` (``brainmem-ros demo --bag``): starts ``brainmem-ros bringup`` on a fresh store,
replays ``bags/kitchen_run`` into it over DDS, lets consolidation run, then asks
``/retrieve_memory`` a few questions and prints the answers and the memory prompt.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from brainmem_ros.bringup.run import stop_process_groups
from brainmem_ros.nodes import names

__all__ = ["run_demo", "run_bag_demo", "QUESTIONS"]

DEMO_SEEDS = "0-9"


def run_demo(out: Path = Path("results"), seeds: str = DEMO_SEEDS) -> int:
    from brainmem_ros.evaluation.plot import plot_eval
    from brainmem_ros.evaluation.runner import EvalSettings, parse_seeds, table, write_json
    from brainmem_ros.evaluation.via_ros import evaluate_via_ros

    settings = EvalSettings(env="kitchen", seeds=parse_seeds(seeds), interruptions=True, window=5,
                            max_steps=100)
    print(
        f"[demo] our kitchen, seeds {seeds}, a timer interrupts each episode; K = "
        f"{settings.window}; "
        f"conditions {', '.join(settings.conditions)}", flush=True)
    print(
        "[demo] starting the memory nodes, kitchen_sim_node and one planner_node per condition "
        "(DDS)", flush=True)
    report = evaluate_via_ros(settings)
    print()
    print(table(report))
    write_json(report, str(out / "demo_eval.json"))
    plot_eval([report], out / "demo_eval.png")
    print(f"\n[demo] report {out / 'demo_eval.json'}, plot {out / 'demo_eval.png'}; "
          f"{report['wall_s']} s")
    return 0


QUESTIONS = [
    ("where is the butter?", "make a sandwich"),
    ("where is the tomato now?", "make a sandwich"),
    ("is it safe to pour water into the coffee machine?", "make coffee"),
    ("what did I just do?", "make a sandwich"),
]


def _bag() -> Path:
    here = Path(__file__).resolve().parent.parent / "bags" / "kitchen_run"
    if here.is_dir():
        return here
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("brainmem_ros")) / "bags" / "kitchen_run"


def run_bag_demo(timeout_s: float = 120.0) -> int:
    import rclpy

    from brainmem_ros.nodes.runtime import call_spinning
    from brainmem_ros.replay.bag import replay
    from brainmem_ros.srv import Consolidate, RetrieveMemory

    folder = Path(tempfile.mkdtemp(prefix="brainmem-demo-"))
    ready = folder / "ready"
    print(f"[demo] starting the memory nodes (brainmem-ros bringup) on {folder / 'memory.db'}",
          flush=True)
    child = subprocess.Popen([
        sys.executable, "-m", "brainmem_ros.cli", "bringup", "--store",
        str(folder / "memory.db"), "--ready-file",
        str(ready)
    ], start_new_session=True)
    rclpy.init()
    node = rclpy.create_node("brainmem_demo")
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)

    def call(srv, name, request):
        client = node.create_client(srv, name)
        if not client.wait_for_service(timeout_sec=30.0):
            raise TimeoutError(f"{name} did not come up")
        answer = call_spinning(executor, client, request, 30.0, resend_s=5.0)
        if answer is None:
            raise TimeoutError(f"{name} gave no answer")
        return answer

    try:
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                print("[demo] the memory nodes did not start", file=sys.stderr)
                return 1
            time.sleep(0.2)
        bag = _bag()
        report = replay(node, bag, rate=4.0, restamp=True)
        print(f"[demo] replayed {report.published} recorded messages from {bag} at 4x over DDS",
              flush=True)
        time.sleep(1.0)  # the encoder hands its last batch to the store
        done = call(Consolidate, names.CONSOLIDATE,
                    Consolidate.Request(agent_id="robot", reason="demo"))
        print(
            f"[demo] consolidated: {done.promoted} traces promoted, {done.facts} facts, "
            f"{done.superseded} superseded, {done.warnings} warnings\n", flush=True)
        for query, context in QUESTIONS:
            t0 = time.perf_counter()
            answer = call(
                RetrieveMemory, names.RETRIEVE_MEMORY,
                RetrieveMemory.Request(agent_id="robot", query=query, context=context, top_k=4))
            ms = (time.perf_counter() - t0) * 1000
            print(f"Q: {query}   ({ms:.1f} ms, success={answer.success})")
            for m in answer.memories:
                print(f"   {m.score:.2f} [{m.zone}, {'+'.join(m.routes)}] {m.content}")
            for w in answer.warnings:
                print(f"   warning: {w}")
            print()
        print("The memory prompt for the last question, as the planner sees it:\n")
        print(answer.memory_prompt)
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        stop_process_groups([child])
