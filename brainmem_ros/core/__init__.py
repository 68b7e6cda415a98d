"""The memory core: encoding, working and long-term memory, consolidation, retrieval, forgetting.

Nothing here imports rclpy or a ROS message type: the core runs and is tested without ROS, and the
nodes in ``brainmem_ros.nodes`` only translate messages to and from it. ``memory.BrainMemory`` is
the whole cycle behind one object.
"""
