"""``brainmem-ros bringup``: the nodes of ``memory.launch.py``, without ``ros2 launch``.

``node_table`` lists the nodes (the launch file reads it too); ``run`` starts them.
"""
from brainmem_ros.bringup.node_table import default_config, stack
from brainmem_ros.bringup.run import bringup, bringup_processes

__all__ = ["bringup", "bringup_processes", "default_config", "stack"]
