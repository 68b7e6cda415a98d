"""The unit tier runs without ROS and without the embedding model, and so stays fast.

Each test runs with rclpy, the generated interfaces and the real model made unavailable: a test
that needs one of them fails here, and belongs in another tier.
"""
import sys

import pytest

_ROS_MODULES = ("rclpy", "rosidl_runtime_py", "brainmem_ros.msg", "brainmem_ros.srv")


@pytest.fixture(autouse=True)
def _no_ros_and_no_model(monkeypatch):
    for name in _ROS_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now raises ImportError

    def refuse(*args, **kwargs):
        raise AssertionError(
            "the unit tier runs without the embedding model: move this test to test/model")

    from brainmem_ros.core.embedding import MiniLMEmbedder

    monkeypatch.setattr(MiniLMEmbedder, "__init__", refuse)
