"""Recorded runs: rosbag2 files written, read and played into the running nodes (``bag``)."""
from brainmem_ros.replay.bag import BagError, ReplayReport, read_bag, replay, write_bag

__all__ = ["BagError", "ReplayReport", "read_bag", "replay", "write_bag"]
