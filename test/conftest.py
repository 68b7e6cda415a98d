"""Shared test setup, and the tiers.

Tests live in one folder per tier, and the folder gives each test its markers, so a slow test
cannot land in the fast tier by accident:

  unit/    the core and the tools without ROS and without the embedding model (``make test-fast``)
  model/   the real all-MiniLM-L6-v2 model, no DDS
  ros/     nodes and interfaces over real DDS between processes
  launch/  launch_testing (needs the ROS 2 launch stack; skipped where it is not installed)
  system/  end to end: crash safety, faults, load, benchmark, evaluations

DDS traffic of one test run is kept apart from any other on the machine: a domain id derived from
the process id, discovery limited to this host. Subprocesses inherit both through the environment.
"""
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TIERS = {
    "unit": ("unit", ),
    "model": ("model", ),
    "ros": ("ros", ),
    "launch": ("ros", "launch_test"),
    "system": ("system", "slow")
}
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_collection_modifyitems(config, items):
    """Mark every test with its folder's tier; a test outside the tier folders is an error."""
    for item in items:
        path = Path(str(item.fspath)).resolve()
        tier = path.relative_to(REPO_ROOT / "test").parts[0] if path.is_relative_to(REPO_ROOT /
                                                                                    "test") else ""
        if tier not in TIERS:
            raise pytest.UsageError(
                f"{path} is outside the test tiers ({', '.join(TIERS)}): move it into one")
        for marker in TIERS[tier]:
            item.add_marker(marker)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def minilm():
    """Load the real all-MiniLM-L6-v2 (ONNX backend) once per test session."""
    from brainmem_ros.core.embedding import MiniLMEmbedder

    return MiniLMEmbedder("onnx")


@pytest.fixture
def hashing():
    """Make the hashing stand-in embedder: deterministic, no meaning; for plumbing only."""
    from brainmem_ros.core.embedding import HashingEmbedder

    return HashingEmbedder()


@pytest.fixture
def make_memory(tmp_path):
    """Build BrainMemory instances on a temporary store; closes them all at the end."""
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.memory import BrainMemory

    made = []

    def make(embedder, path=None, **flat):
        config = MemoryConfig().replace(**{
            "store.path": str(path or tmp_path / "memory.db"),
            **flat
        })
        memory = BrainMemory(config, embedder=embedder)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        if memory.store._db.conn is not None:
            memory.close()


@pytest.fixture(scope="module")
def fleet_server():
    """Start a real PostgreSQL server for a fleet with the project's command; stop it at the end.

    Yields its folder; ``brainmem_ros.bringup.fleet_db.add_robot_dsn(folder, NAME)`` gives a robot
    its role. Skipped, with the reason, where PostgreSQL's server is not installed.
    """
    from brainmem_ros.bringup import fleet_db
    from brainmem_ros.core.errors import StoreUnavailable

    try:
        fleet_db.server_binaries()
    except StoreUnavailable as exc:
        pytest.skip(str(exc))
    import shutil
    import tempfile

    # Not under pytest's folders: as root the server runs as ``postgres``, which must reach it.
    folder = Path(tempfile.mkdtemp(prefix="brainmem-fleet-"))
    fleet_db.start(folder, port=5432)
    try:
        yield folder
    finally:
        try:
            fleet_db.stop(folder)
        except StoreUnavailable:
            pass  # a test stopped it already
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def scratch(monkeypatch):
    """Point this process's and its children's temporary folders at an empty folder of their own.

    A run that cleans up after itself leaves none of its ``brainmem-*`` folders there; one that
    leaves stores or a database server's files behind fills a robot's or a CI machine's disk run by
    run (onnxruntime's one ``.ses`` file is not ours). Under /tmp and readable by others, not under
    pytest's folders: as root a fleet's server runs as ``postgres``.
    """
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="brainmem-scratch-"))
    folder.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
