"""Shared test setup.

DDS traffic of one test run is kept apart from any other on the machine: a domain id derived from
the process id, discovery limited to this host. Subprocesses inherit both through the environment.
"""
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 (ONNX backend), loaded once per test session."""
    from brainmem_ros.embedding import MiniLMEmbedder

    return MiniLMEmbedder("onnx")


@pytest.fixture
def hashing():
    from brainmem_ros.embedding import HashingEmbedder

    return HashingEmbedder()


@pytest.fixture
def make_memory(tmp_path):
    """Build BrainMemory instances on a temporary store; closes them all at the end."""
    from brainmem_ros.config import MemoryConfig
    from brainmem_ros.memory import BrainMemory

    made = []

    def make(embedder, path=None, **flat):
        config = MemoryConfig().replace(**{"store.path": str(path or tmp_path / "memory.db"), **flat})
        memory = BrainMemory(config, embedder=embedder)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        if memory.store._conn is not None:
            memory.close()
