"""``brainmem-ros bringup``: the nodes ``memory.launch.py`` starts, without ``ros2 launch``.

The same node table (``node_table``), the same parameter file, the same arguments: a namespace
that puts every topic and service of the stack under it, and simulated time. One process per node
by default, as ``ros2 launch`` starts them: each node then has its own interpreter lock, so the
encoder embedding a stream of observations and the executor's own bookkeeping do not queue the
store's answers behind them. ``--one-process`` is the light way for one planner (one interpreter,
one model in memory).

Ctrl-C or SIGTERM, at any moment and as often as it comes, stops the producers first and the store
last, so the encoder hands its queue to a store that still serves and the store flushes its access
counts, index and working-memory snapshot. If a memory node exits on its own, the others are
stopped and the command exits 1.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from brainmem_ros.bringup.node_table import NodeSpec, check_namespace, default_config, stack
from brainmem_ros.nodes import names
from brainmem_ros.nodes.signals import hold

__all__ = ["bringup", "bringup_processes", "ros_arguments", "node_arguments", "STOP_S",
           "stop_process_groups"]

NODE_STOP_S = 30.0  # each wave of node processes (the producers, then the store) gets this to close
# The longest a bringup takes to stop: both waves and its own exit. Whoever stops one waits this
# long before killing it: a bringup killed sooner leaves its store closing (and writing) on its own.
STOP_S = 2 * NODE_STOP_S + 15.0


def stop_process_groups(children: Sequence[subprocess.Popen], timeout_s: float = STOP_S) -> None:
    """Stop processes started in process groups of their own (a bringup, a node): SIGINT, then wait.

    Every group is asked first, so they close side by side, and all share one deadline: however many
    hang, the stop takes at most ``timeout_s`` before those still running are killed.
    """
    for child in children:
        if child.poll() is None:
            _signal_group(child, signal.SIGINT)
    deadline = time.monotonic() + timeout_s
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGKILL)
            child.wait()


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)
    except ProcessLookupError:  # the group ended between the check and the signal
        pass


def _namespace_or_none(namespace: str) -> Optional[str]:
    """Return the namespace as ROS writes it, or None after saying why ROS would refuse it."""
    try:
        return check_namespace(namespace)
    except ValueError as exc:
        print(f"[FATAL] brainmem-ros bringup: {exc}", file=sys.stderr, flush=True)
        return None


def ros_arguments(config: Optional[Path], store: Optional[str], namespace: str = "",
                  use_sim_time: bool = False, extra: Sequence[str] = (),
                  fleet: str = "") -> list[str]:
    """Return the ``--ros-args`` every node of the stack gets."""
    args = ["--ros-args", "--params-file", str(config or default_config())]
    if store:
        args += ["-p", f"store.path:={os.path.abspath(os.path.expanduser(store))}"]
    if fleet:
        args += ["-p", f"fleet.dsn:={fleet}"]
    if namespace:
        args += ["-r", f"__ns:={namespace}"]
    if use_sim_time:
        args += ["-p", "use_sim_time:=true"]
    return args + list(extra)


def node_arguments(spec: NodeSpec) -> list[str]:
    """Return a node's own parameters from the table, as ``-p name:=value`` arguments."""
    out = []
    for key, value in spec.parameters.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out += ["-p", f"{key}:={text}"]
    return out


def bringup(config: Optional[Path] = None, store: Optional[str] = None,
            ready_file: Optional[Path] = None, extra_ros_args: Sequence[str] = (),
            demo: bool = False, namespace: str = "", use_sim_time: bool = False,
            captions: bool = False, fleet: str = "") -> int:
    """Run the stack's nodes in this process until a stop is asked for (``--one-process``)."""
    stop = hold()
    namespace = _namespace_or_none(namespace)
    if namespace is None:
        return 2
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.nodes.runtime import release, spin_until_signal

    config = config or default_config()
    try:
        core = MemoryConfig.from_yaml(config)
        if fleet:
            core = core.replace(**{"fleet.dsn": fleet})
        embedder = MiniLMEmbedder.configured(core.embedding)
    except BrainMemError as exc:
        print(f"[FATAL] brainmem-ros bringup: {exc}", file=sys.stderr, flush=True)
        return 1
    rclpy.init(args=ros_arguments(config, store, namespace, use_sim_time, extra_ros_args, fleet),
               signal_handler_options=SignalHandlerOptions.NO)
    nodes = []
    try:
        for spec in stack(demo, captions):
            overrides = [Parameter(k, value=v) for k, v in spec.parameters.items()]
            uses_model = spec.name in ("store_node", "encoder_node")
            nodes.append(_node_class(spec.name)(parameter_overrides=overrides,
                                                **({"embedder": embedder} if uses_model else {})))
    except BrainMemError as exc:
        print(f"[FATAL] brainmem-ros bringup: {exc}", file=sys.stderr, flush=True)
        for node in reversed(nodes):
            getattr(node, "close", lambda: None)()
            node.destroy_node()
        rclpy.try_shutdown()
        return 1

    def ready() -> None:
        print(f"brainmem-ros bringup: {', '.join(n.get_name() for n in nodes)} up in "
              f"{namespace or '/'}; store {nodes[0].memory.store.path}", flush=True)
        if ready_file:
            ready_file.write_text(str(os.getpid()))

    # Producers close first, so the encoder hands its queue to a store that still serves.
    order = nodes[1:] + nodes[:1]
    try:
        if not stop.is_set():
            spin_until_signal(nodes, close_order=order, on_ready=ready)
    finally:
        if stop.is_set():
            for node in order:
                getattr(node, "close", lambda: None)()
        rclpy.try_shutdown()
        order.clear()
        release(nodes)
    print("brainmem-ros bringup: stopped, memory flushed", flush=True)
    return 0


def _node_class(name: str):
    from importlib import import_module

    module = import_module(f"brainmem_ros.nodes.{name}")
    return getattr(module, "".join(part.title() for part in name.split("_")[:-1]) + "Node")


def bringup_processes(config: Optional[Path] = None, store: Optional[str] = None,
                      ready_file: Optional[Path] = None, extra_ros_args: Sequence[str] = (),
                      demo: bool = False, namespace: str = "", use_sim_time: bool = False,
                      captions: bool = False, fleet: str = "", start_timeout_s: float = 120.0,
                      stop_timeout_s: float = NODE_STOP_S) -> int:
    """Run each node of the stack in its own process (``python -m brainmem_ros.nodes NAME``).

    Ready once the store serves and the encoder listens. A stop asked for while the nodes start
    stops them as soon as they can, and the exit is 0 when they all closed cleanly.
    """
    stop = hold()
    namespace = _namespace_or_none(namespace)
    if namespace is None:
        return 2
    args = ros_arguments(config, store, namespace, use_sim_time, extra_ros_args, fleet)
    specs = stack(demo, captions)
    children: dict[str, subprocess.Popen] = {}
    failed = False
    try:
        for spec in specs:
            # Each child gets its own process group: a Ctrl-C at the terminal reaches this process
            # only, which then stops the producers before the store.
            children[spec.name] = subprocess.Popen(
                [sys.executable, "-m", "brainmem_ros.nodes", spec.name, *args,
                 *node_arguments(spec)], start_new_session=True,
                preexec_fn=_interrupt_when_parent_dies)
        serving = _wait_until_serving(children, namespace, stop, start_timeout_s)
        if serving:
            print(f"brainmem-ros bringup: {', '.join(children)} up in {namespace or '/'}, one "
                  f"process each (pids {' '.join(str(c.pid) for c in children.values())})",
                  flush=True)
            if ready_file:
                ready_file.write_text(str(os.getpid()))
            failed = _watch(children, specs, stop)
        else:
            failed = not stop.is_set()
    finally:
        codes = _stop_children(children, stop_timeout_s)
    if not failed and all(code == 0 for code in codes.values()):
        print("brainmem-ros bringup: stopped, memory flushed", flush=True)
        return 0
    print(f"brainmem-ros bringup: stopped; exit codes {codes}", file=sys.stderr, flush=True)
    return 1


def _watch(children: dict, specs: Sequence[NodeSpec], stop) -> bool:
    """Wait for a stop; True if a memory node exited on its own first."""
    memory = {spec.name for spec in specs if spec.memory}
    while not stop.wait(0.2):
        gone = [n for n, c in children.items() if c.poll() is not None and n in memory]
        if gone:
            print(f"[ERROR] brainmem-ros bringup: {', '.join(gone)} exited (code "
                  f"{children[gone[0]].returncode}); stopping the others", file=sys.stderr,
                  flush=True)
            return True
    return False


def _interrupt_when_parent_dies() -> None:
    """Have the kernel send SIGINT to this child when its bringup dies (Linux).

    A node whose bringup was killed then closes cleanly instead of living on.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _wait_until_serving(children: dict, namespace: str, stop, timeout_s: float) -> bool:
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from brainmem_ros.srv import IngestTraces, RetrieveMemory

    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("brainmem_bringup", namespace=namespace or "/", context=context)
    try:
        clients = [node.create_client(RetrieveMemory, names.RETRIEVE_MEMORY),
                   node.create_client(IngestTraces, names.INGEST_TRACES)]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not stop.is_set():
            failed = [n for n, c in children.items() if c.poll() is not None]
            if failed:
                print(f"[FATAL] brainmem-ros bringup: {', '.join(failed)} did not start (see its "
                      "message above)", file=sys.stderr, flush=True)
                return False
            if all(c.service_is_ready() for c in clients) \
                    and node.count_subscribers(names.OBSERVATION) > 0:
                return True
            time.sleep(0.2)
        if not stop.is_set():
            print(f"[FATAL] brainmem-ros bringup: the memory nodes were not serving after "
                  f"{timeout_s:.0f} s", file=sys.stderr, flush=True)
        return False
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _stop_children(children: dict, timeout_s: float) -> dict:
    """Stop the producers first and the store last.

    The encoder then hands its queue to a store that still serves. A stop asked for again meanwhile
    changes nothing (the signal only sets the stop event).
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
