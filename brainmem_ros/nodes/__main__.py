"""``python -m brainmem_ros.nodes NODE [--ros-args ...]``: one node in this process.

Signals are held before the node's module is imported, so a stop asked for during start-up ends the
node cleanly once it has started.
"""
import sys

from brainmem_ros.nodes.signals import hold

NODES = ("store_node", "encoder_node", "consolidation_node", "caption_node", "planner_node",
         "kitchen_sim_node")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in NODES:
        print(f"usage: python -m brainmem_ros.nodes {{{','.join(NODES)}}} [--ros-args ...]",
              file=sys.stderr)
        return 2
    hold()
    from importlib import import_module

    return import_module(f"brainmem_ros.nodes.{argv[0]}").main(argv[1:])


sys.exit(main(sys.argv[1:]))
