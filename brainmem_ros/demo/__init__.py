"""``brainmem-ros demo``: the main job (kitchen episodes over ROS) and a bag walkthrough."""
from brainmem_ros.demo.run import QUESTIONS, run_bag_demo, run_demo

__all__ = ["run_demo", "run_bag_demo", "QUESTIONS"]
