"""``brainmem-ros loadtest``: the ROS path under load (``run``) and its client processes."""
from brainmem_ros.loadtest.run import describe, run_loadtest

__all__ = ["run_loadtest", "describe"]
