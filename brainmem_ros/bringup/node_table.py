"""The nodes of a brainmem_ros stack, in one table.

``launch/memory.launch.py`` and ``brainmem-ros bringup`` both start their nodes from this table,
with the same parameter file and the same node-specific parameters, so the two cannot drift apart.
Importing it is cheap (no rclpy), so the launch file can.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NodeSpec", "MEMORY_NODES", "CAPTION_NODES", "DEMO_NODES", "stack", "default_config",
           "check_namespace"]


@dataclass(frozen=True)
class NodeSpec:
    """One node of the stack: its executable (also its name) and its own parameters."""

    name: str
    parameters: dict = field(default_factory=dict)
    memory: bool = True  # a memory node: when it exits, the stack stops


MEMORY_NODES = (NodeSpec("store_node"), NodeSpec("encoder_node"), NodeSpec("consolidation_node"))
# Standard inputs: captions (std_msgs/String) placed at the robot's pose become observations.
CAPTION_NODES = (NodeSpec("caption_node", memory=False), )
# The kitchen demo: a few interrupted kitchen episodes played by a scripted planner.
DEMO_NODES = (
    NodeSpec("kitchen_sim_node", {"interruptions": True}, memory=False),
    NodeSpec("planner_node", {"backend": "scripted", "condition": "brainmem", "seeds": "0-2"},
             memory=False),
)
# The part of a ROS namespace between slashes: a letter or underscore, then letters, digits and
# underscores (rcl's rules: no empty part, no part starting with a digit).
_NAMESPACE_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def stack(demo: bool = False, captions: bool = False) -> tuple[NodeSpec, ...]:
    """Return the nodes to start: the memory nodes, then caption_node, the kitchen and a planner.

    caption_node joins with ``captions``, the kitchen and a planner with ``demo``.
    """
    return MEMORY_NODES + (CAPTION_NODES if captions else ()) + (DEMO_NODES if demo else ())


def default_config() -> Path:
    """Return config/memory.yaml: the installed share/ copy, else the one of this source tree."""
    try:
        from ament_index_python.packages import get_package_share_directory

        installed = Path(get_package_share_directory("brainmem_ros")) / "config" / "memory.yaml"
        if installed.is_file():
            return installed
    except (ImportError, LookupError, ValueError):
        pass
    return Path(__file__).resolve().parents[2] / "config" / "memory.yaml"


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` as an absolute ROS namespace ("" for none), or raise ValueError.

    ``robot1`` and ``/robot1`` both mean ``/robot1``; parts are letters, digits and underscores,
    not starting with a digit.
    """
    stripped = namespace.strip()
    if stripped in ("", "/"):
        return ""
    parts = stripped.strip("/").split("/")
    bad = [part for part in parts if not _NAMESPACE_PART.fullmatch(part)]
    if bad or stripped.endswith("/") and len(stripped) > 1 or "//" in stripped:
        raise ValueError(f"{namespace!r} is not a ROS namespace: each part between slashes must "
                         "be letters, digits or underscores, not starting with a digit")
    return "/" + "/".join(parts)
