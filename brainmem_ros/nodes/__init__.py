"""The ROS 2 nodes: thin wrappers that translate messages to and from the core and wire callbacks."""
