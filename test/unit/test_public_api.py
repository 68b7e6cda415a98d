"""The public surface is small and deliberate: a change to it is a change to this test."""
import subprocess
import sys

import brainmem_ros


def test_public_names_are_pinned():
    assert brainmem_ros.__all__ == [
        "BrainMemError", "BrainMemory", "ConfigError", "EmbedderUnavailable", "Entry", "Event",
        "Goal", "GoalStatus", "HashingEmbedder", "InvalidRequest", "MemoryConfig",
        "MiniLMEmbedder", "NotServing", "Position", "Recall", "Relation", "RetrievalRequest",
        "RetrievalResult", "StoreUnavailable", "TimeUnavailable", "Trace", "TraceKind", "Zone",
        "__version__",
    ]  # yapf: disable
    for name in brainmem_ros.__all__:
        assert getattr(brainmem_ros, name) is not None


def test_one_exception_tree():
    for name in ("InvalidRequest", "StoreUnavailable", "EmbedderUnavailable", "ConfigError",
                 "TimeUnavailable", "NotServing"):
        assert issubclass(getattr(brainmem_ros, name), brainmem_ros.BrainMemError)


def test_the_core_imports_and_runs_with_rclpy_made_unimportable():
    """The core imports and runs with rclpy made unimportable.

    Every module of brainmem_ros.core imports, and a memory cycle runs, in an interpreter where
    rclpy and every ROS message package cannot be imported at all.
    """
    code = (
        "import importlib, pkgutil, sys\n"
        "for name in ('rclpy', 'rosidl_runtime_py', 'rpyutils', 'builtin_interfaces', 'std_msgs',"
        " 'geometry_msgs', 'diagnostic_msgs', 'visualization_msgs', 'nav_msgs', 'lifecycle_msgs',"
        " 'brainmem_ros.msg', 'brainmem_ros.srv'):\n"
        "    sys.modules[name] = None\n"
        "import brainmem_ros.core as core\n"
        "mods = [m.name for m in pkgutil.walk_packages(core.__path__, 'brainmem_ros.core.')]\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "import tempfile\n"
        "from brainmem_ros import BrainMemory, Event, HashingEmbedder, MemoryConfig, "
        "RetrievalRequest, TraceKind\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    config = MemoryConfig().replace(**{'store.path': d + '/m.db'})\n"
        "    with BrainMemory(config, embedder=HashingEmbedder()) as memory:\n"
        "        memory.encode([Event('r', TraceKind.OBSERVATION, 'the butter is in the "
        "fridge')])\n"
        "        memory.consolidate('r')\n"
        "        answer = memory.retrieve(RetrievalRequest('r', 'where is the butter?'))\n"
        "print(len(mods), any('fridge' in r.entry.content for r in answer.recalls))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules, found = done.stdout.split()
    assert int(modules) >= 25 and found == "True"
