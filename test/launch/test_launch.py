"""launch_testing: `memory.launch.py` brings the nodes up and `/retrieve_memory` answers.

Runs where the ROS 2 launch stack is installed (``launch_testing``, ``launch_ros``: any ROS 2
install; ``colcon test`` or ``launch_test test/test_launch.py``). The PyPI wheels used on machines
without ROS do not include it, so there this file is skipped with that reason; the same nodes are
covered over DDS by test_nodes_integration.py through ``brainmem-ros bringup``.
"""
import os
import tempfile
import unittest

import pytest

launch_testing = pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed (no ROS 2 launch stack)")
launch = pytest.importorskip("launch")
launch_ros = pytest.importorskip("launch_ros")
launch_testing_actions = pytest.importorskip("launch_testing.actions")

from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from brainmem_ros.nodes import names  # noqa: E402

STORE = os.path.join(tempfile.mkdtemp(prefix="brainmem-launch-"), "memory.db")


@pytest.mark.launch_test
def generate_test_description():
    memory = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(
            os.path.join(get_package_share_directory("brainmem_ros"), "launch",
                         "memory.launch.py")), launch_arguments={"store": STORE}.items())
    return launch.LaunchDescription([memory, launch_testing_actions.ReadyToTest()])


class TestRetrieveMemory(unittest.TestCase):

    def test_retrieve_memory_answers(self):
        import rclpy

        from brainmem_ros.srv import RetrieveMemory

        rclpy.init()
        node = rclpy.create_node("launch_test_client")
        try:
            client = node.create_client(RetrieveMemory, names.RETRIEVE_MEMORY)
            self.assertTrue(client.wait_for_service(timeout_sec=60.0),
                            "/retrieve_memory never appeared")
            future = client.call_async(
                RetrieveMemory.Request(agent_id="robot", query="where is the butter?"))
            rclpy.spin_until_future_complete(node, future, timeout_sec=30.0)
            self.assertTrue(future.done(), "no answer within 30 s")
            self.assertTrue(future.result().success, future.result().message)
            self.assertIn("## Relevant memories", future.result().memory_prompt)
        finally:
            node.destroy_node()
            rclpy.shutdown()
