"""The ROS 2 nodes: thin adapters between messages and the memory core.

The ROS 2 nodes: thin wrappers that translate messages to and from the core and wire callbacks.
"""
