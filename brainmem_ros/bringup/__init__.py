"""``brainmem-ros bringup``: the memory nodes without ``ros2 launch`` (``run``)."""
from brainmem_ros.bringup.run import bringup, bringup_processes, default_config

__all__ = ["bringup", "bringup_processes", "default_config"]
