"""launch_testing: ``memory.launch.py`` brings the stack up in its namespace; every node exits 0.

Runs where the ROS 2 launch stack is installed (``launch_testing``, ``launch_ros``: any ROS 2
install; ``colcon test`` or ``launch_test test/launch/test_launch.py``). The PyPI wheels used on
machines without ROS do not include it, so there this file is skipped with that reason; the same
nodes, from the same node table, are covered over DDS through ``brainmem-ros bringup``.
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
launch_testing_asserts = pytest.importorskip("launch_testing.asserts")

from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

STORE_DIR = tempfile.TemporaryDirectory(prefix="brainmem-launch-")
NAMESPACE = "launchbot"


@pytest.mark.launch_test
def generate_test_description():
    memory = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(
            os.path.join(get_package_share_directory("brainmem_ros"), "launch",
                         "memory.launch.py")), launch_arguments={
                             "store": os.path.join(STORE_DIR.name, "memory.db"),
                             "namespace": NAMESPACE
                         }.items())
    return launch.LaunchDescription([memory, launch_testing_actions.ReadyToTest()])


class TestRetrieveMemory(unittest.TestCase):

    def test_retrieve_memory_answers_in_the_namespace(self):
        import rclpy

        from brainmem_ros.srv import RetrieveMemory

        rclpy.init()
        node = rclpy.create_node("launch_test_client")
        try:
            client = node.create_client(RetrieveMemory, f"/{NAMESPACE}/retrieve_memory")
            self.assertTrue(client.wait_for_service(timeout_sec=60.0),
                            f"/{NAMESPACE}/retrieve_memory never appeared")
            future = client.call_async(
                RetrieveMemory.Request(agent_id="robot", query="where is the butter?"))
            rclpy.spin_until_future_complete(node, future, timeout_sec=30.0)
            self.assertTrue(future.done(), "no answer within 30 s")
            self.assertTrue(future.result().success, future.result().message)
            self.assertIn("## Relevant memories", future.result().memory_prompt)
        finally:
            node.destroy_node()
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestAfterShutdown(unittest.TestCase):

    def test_every_node_exited_cleanly(self, proc_info):
        launch_testing_asserts.assertExitCodes(proc_info)

    @classmethod
    def tearDownClass(cls):
        STORE_DIR.cleanup()
