"""``brainmem-ros bringup``: the memory nodes in one process, from the same parameter file the launch
file uses, for machines without ``ros2 launch``. Ctrl-C closes every node (the store flushes its
access counts, saves its index and the working-memory snapshot) before the process exits.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["bringup", "default_config"]


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


def ros_arguments(config: Optional[Path], store: Optional[str], extra: Sequence[str] = ()) -> list[str]:
    args = ["--ros-args", "--params-file", str(config or default_config())]
    if store:
        args += ["-p", f"store.path:={os.path.abspath(os.path.expanduser(store))}"]
    return args + list(extra)


DEMO_PARAMETERS = ["-p", "interruptions:=true", "-p", "seeds:=0-2", "-p", "condition:=brainmem"]


def bringup(config: Optional[Path] = None, store: Optional[str] = None,
            ready_file: Optional[Path] = None, extra_ros_args: Sequence[str] = (), demo: bool = False) -> int:
    """``demo``: the kitchen and a scripted planner join the memory nodes (a few interrupted
    episodes, logged as they finish), as ``memory.launch.py demo:=true`` does."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from brainmem_ros.config import MemoryConfig
    from brainmem_ros.embedding import MiniLMEmbedder
    from brainmem_ros.errors import BrainMemError
    from brainmem_ros.nodes.consolidation_node import ConsolidationNode
    from brainmem_ros.nodes.encoder_node import EncoderNode
    from brainmem_ros.nodes.runtime import spin_until_signal
    from brainmem_ros.nodes.store_node import StoreNode

    config = config or default_config()
    try:
        core = MemoryConfig.from_yaml(config)
        embedder = MiniLMEmbedder(core.embedding.backend, core.embedding.threads, core.embedding.batch_size)
    except BrainMemError as exc:
        print(f"[FATAL] brainmem-ros bringup: {exc}", flush=True)
        return 1
    extra = list(extra_ros_args) + (DEMO_PARAMETERS if demo else [])
    rclpy.init(args=ros_arguments(config, store, extra), signal_handler_options=SignalHandlerOptions.NO)
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
        print(f"brainmem-ros bringup: {', '.join(n.get_name() for n in nodes)} up; store "
              f"{nodes[0].memory.store.path}", flush=True)
        if ready_file:
            ready_file.write_text(str(os.getpid()))

    # Producers close first, so the encoder hands its queue to a store that still serves.
    order = [n for n in nodes if not isinstance(n, StoreNode)] + [nodes[0]]
    try:
        spin_until_signal(nodes, close_order=order, on_ready=ready)
    finally:
        rclpy.try_shutdown()
    print("brainmem-ros bringup: stopped, memory flushed", flush=True)
    return 0
