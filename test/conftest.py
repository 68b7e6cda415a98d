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
