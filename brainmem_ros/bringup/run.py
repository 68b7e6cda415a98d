"""``brainmem-ros bringup``: the memory nodes without ``ros2 launch``.

``brainmem-ros bringup``: the memory nodes from the same parameter file the launch file uses, for
machines without ``ros2 launch``: in one process (an rclpy executor), or with ``--processes`` one
process per node as ``ros2 launch`` starts them. Ctrl-C closes every node (the store flushes its
access counts, saves its index and the working-memory snapshot) before the command exits.

One process is the light way to run it; one process per node is the fast way under load: each node
then has its own interpreter lock, so the encoder embedding a stream of observations and the
executor's own bookkeeping no longer queue the store's answers behind them (``brainmem-ros
loadtest`` measures both).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional, Sequence
from brainmem_ros.nodes import names

__all__ = ["bringup", "bringup_processes", "default_config"]

MEMORY_NODES = ("store_node", "encoder_node", "consolidation_node")


def default_config() -> Path:
    """config/memory.yaml: the installed share/ copy, else the one in this source tree."""
    try:
        from ament_index_python.packages import get_package_share_directory

        installed = Path(get_package_share_directory("brainmem_ros")) / "config" / "memory.yaml"
        if installed.is_file():
            return installed
    except (ImportError, LookupError, ValueError):
        pass
    return Path(__file__).resolve().parent.parent / "config" / "memory.yaml"


def ros_arguments(config: Optional[Path], store: Optional[str],
                  extra: Sequence[str] = ()) -> list[str]:
    args = ["--ros-args", "--params-file", str(config or default_config())]
    if store:
        args += ["-p", f"store.path:={os.path.abspath(os.path.expanduser(store))}"]
    return args + list(extra)


DEMO_PARAMETERS = ["-p", "interruptions:=true", "-p", "seeds:=0-2", "-p", "condition:=brainmem"]


def bringup(config: Optional[Path] = None, store: Optional[str] = None,
            ready_file: Optional[Path] = None, extra_ros_args: Sequence[str] = (),
            demo: bool = False) -> int:
    """Run the memory nodes in this process until Ctrl-C or SIGTERM.

    ``demo``: the kitchen and a scripted planner join the memory nodes (a few interrupted episodes,
    logged as they finish), as ``memory.launch.py demo:=true`` does.
    """
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.nodes.consolidation_node import ConsolidationNode
    from brainmem_ros.nodes.encoder_node import EncoderNode
    from brainmem_ros.nodes.runtime import release, spin_until_signal
    from brainmem_ros.nodes.store_node import StoreNode

    config = config or default_config()
    try:
        core = MemoryConfig.from_yaml(config)
        embedder = MiniLMEmbedder.configured(core.embedding)
    except BrainMemError as exc:
        print(f"[FATAL] brainmem-ros bringup: {exc}", flush=True)
        return 1
    extra = list(extra_ros_args) + (DEMO_PARAMETERS if demo else [])
    rclpy.init(args=ros_arguments(config, store, extra),
               signal_handler_options=SignalHandlerOptions.NO)
    nodes = []
    try:
        nodes.append(StoreNode(embedder=embedder))
        nodes.append(EncoderNode(embedder=embedder))
        nodes.append(ConsolidationNode())
        if demo:
            from brainmem_ros.nodes.kitchen_sim_node import KitchenSimNode
            from brainmem_ros.nodes.planner_node import PlannerNode

            nodes.append(KitchenSimNode())
            nodes.append(PlannerNode())
    except BrainMemError as exc:
        print(f"[FATAL] brainmem-ros bringup: {exc}", flush=True)
        for node in reversed(nodes):
            getattr(node, "close", lambda: None)()
            node.destroy_node()
        rclpy.try_shutdown()
        return 1

    def ready() -> None:
        print(
            f"brainmem-ros bringup: {', '.join(n.get_name() for n in nodes)} up; store "
            f"{nodes[0].memory.store.path}", flush=True)
        if ready_file:
            ready_file.write_text(str(os.getpid()))

    # Producers close first, so the encoder hands its queue to a store that still serves.
    order = [n for n in nodes if not isinstance(n, StoreNode)] + [nodes[0]]
    try:
        spin_until_signal(nodes, close_order=order, on_ready=ready)
    finally:
        rclpy.try_shutdown()
        order.clear()
        release(nodes)
    print("brainmem-ros bringup: stopped, memory flushed", flush=True)
    return 0


def bringup_processes(config: Optional[Path] = None, store: Optional[str] = None,
                      ready_file: Optional[Path] = None, extra_ros_args: Sequence[str] = (),
                      demo: bool = False, start_timeout_s: float = 120.0,
                      stop_timeout_s: float = 30.0) -> int:
    """Each node in its own process (``python -m brainmem_ros.nodes.<name>``).

    Ready once the store serves and the encoder listens; if any node exits, the others are stopped
    and the exit is 1.
    """
    args = ros_arguments(config, store, extra_ros_args)
    names = list(MEMORY_NODES) + (["kitchen_sim_node", "planner_node"] if demo else [])
    children: dict[str, subprocess.Popen] = {}
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set())
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        for name in names:
            extra = DEMO_PARAMETERS if demo and name == "planner_node" else []
            if demo and name == "kitchen_sim_node":
                extra = ["-p", "interruptions:=true"]
            # Each child gets its own process group: a Ctrl-C at the terminal reaches this process
            # only, which then stops the producers before the store, as the one-process bringup
            # does.
            children[name] = subprocess.Popen(
                [sys.executable, "-m", f"brainmem_ros.nodes.{name}", *args, *extra],
                start_new_session=True, preexec_fn=_interrupt_when_parent_dies)
        if not _wait_until_serving(children, stop, start_timeout_s):
            return 1
        print(
            f"brainmem-ros bringup: {', '.join(names)} up, one process each "
            f"(pids {' '.join(str(c.pid) for c in children.values())})", flush=True)
        if ready_file:
            ready_file.write_text(str(os.getpid()))
        while not stop.wait(0.2):
            gone = [n for n, c in children.items() if c.poll() is not None]
            if gone:
                print(
                    f"[ERROR] brainmem-ros bringup: {', '.join(gone)} exited "
                    f"(code {children[gone[0]].returncode}); stopping the others", file=sys.stderr,
                    flush=True)
                break
    finally:
        codes = _stop_children(children, stop_timeout_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if all(code == 0 for code in codes.values()):
        print("brainmem-ros bringup: stopped, memory flushed", flush=True)
        return 0
    print(f"brainmem-ros bringup: stopped; exit codes {codes}", file=sys.stderr, flush=True)
    return 1


def _interrupt_when_parent_dies() -> None:
    """Have the kernel send SIGINT to this child when its bringup dies (Linux).

    Linux: a node whose bringup was killed gets SIGINT and closes cleanly instead of living on.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _wait_until_serving(children: dict, stop: threading.Event, timeout_s: float) -> bool:
    import rclpy

    from brainmem_ros.srv import IngestTraces, RetrieveMemory

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("brainmem_bringup", context=context)
    try:
        clients = [
            node.create_client(RetrieveMemory, names.RETRIEVE_MEMORY),
            node.create_client(IngestTraces, names.INGEST_TRACES)
        ]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not stop.is_set():
            failed = [n for n, c in children.items() if c.poll() is not None]
            if failed:
                print(
                    f"[FATAL] brainmem-ros bringup: {', '.join(failed)} did not start (see its "
                    "message above)", file=sys.stderr, flush=True)
                return False
            if all(c.service_is_ready()
                   for c in clients) and node.count_subscribers(names.OBSERVATION) > 0:
                return True
            time.sleep(0.2)
        if not stop.is_set():
            print(
                "[FATAL] brainmem-ros bringup: the memory nodes were not serving after "
                f"{timeout_s:.0f} s", file=sys.stderr, flush=True)
        return False
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _stop_children(children: dict, timeout_s: float) -> dict:
    """Stop the producers first and the store last.

    Producers first, the store last, so the encoder hands its queue to a store that still serves.
    """
    producers = [n for n in children if n != "store_node"]
    for wave in (producers, [n for n in children if n == "store_node"]):
        for name in wave:
            if children[name].poll() is None:
                os.killpg(children[name].pid, signal.SIGINT)
        for name in wave:
            try:
                children[name].wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                print(f"[ERROR] {name} did not stop within {timeout_s:.0f} s; killed",
                      file=sys.stderr, flush=True)
                os.killpg(children[name].pid, signal.SIGKILL)
                children[name].wait()
    return {name: child.returncode for name, child in children.items()}
