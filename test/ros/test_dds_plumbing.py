"""Two processes exchange the package's types over real DDS.

Two processes exchange the package's types over real DDS: an Observation published here reaches a
peer process, and a RetrieveMemory call to that peer returns it.
"""
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy

from processes import Child
from brainmem_ros.nodes import names

HERE = Path(__file__).resolve().parents[1]


@pytest.fixture
def peer():
    child = Child([str(HERE / "plumbing_server.py")])
    try:
        child.wait_for_line("READY", timeout=30)
        yield child
    finally:
        child.stop()


@pytest.fixture
def node():
    context = rclpy.Context()
    rclpy.init(context=context)
    n = rclpy.create_node("plumbing_client", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(n)
    n.executor_for_test = executor
    try:
        yield n
    finally:
        executor.shutdown()
        n.destroy_node()
        rclpy.shutdown(context=context)


def test_observation_and_retrieve_cross_processes(peer, node):
    from brainmem_ros.msg import Observation
    from brainmem_ros.srv import RetrieveMemory

    executor = node.executor_for_test
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    publisher = node.create_publisher(Observation, names.OBSERVATION, qos)
    client = node.create_client(RetrieveMemory, names.RETRIEVE_MEMORY)
    assert client.wait_for_service(timeout_sec=20.0), "peer's /retrieve_memory never appeared"

    deadline = time.monotonic() + 20.0
    while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
    assert publisher.get_subscription_count() >= 1, "peer never subscribed to /brainmem/observation"

    publisher.publish(
        Observation(agent_id="robot_a", text="the butter is in the fridge",
                    entities=["butter", "fridge"], source="test", confidence=1.0))

    answer = None
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        future = client.call_async(
            RetrieveMemory.Request(agent_id="robot_a", query="where is the butter", top_k=3))
        executor.spin_until_future_complete(future, timeout_sec=5.0)
        assert future.done(), "RetrieveMemory call got no answer within 5 s"
        answer = future.result()
        if answer.memories:
            break
        time.sleep(0.1)
    assert answer is not None and answer.success
    assert [m.content for m in answer.memories] == ["the butter is in the fridge"]
    assert list(answer.memories[0].entities) == ["butter", "fridge"]
    assert "butter is in the fridge" in answer.memory_prompt

    other = client.call_async(RetrieveMemory.Request(agent_id="robot_b", query="butter"))
    executor.spin_until_future_complete(other, timeout_sec=5.0)
    assert other.done() and other.result().memories == []
