"""The public surface is small and deliberate: a change to it is a change to this test."""
import subprocess
import sys

import brainmem_ros


def test_public_names_are_pinned():
    assert brainmem_ros.__all__ == [
        "BrainMemError", "BrainMemory", "ConfigError", "EmbedderUnavailable", "Entry", "Event", "Goal",
        "GoalStatus", "HashingEmbedder", "InvalidRequest", "MemoryConfig", "MiniLMEmbedder", "Position",
        "Recall", "Relation", "RetrievalRequest", "RetrievalResult", "StoreUnavailable", "Trace",
        "TraceKind", "Zone", "__version__",
    ]
    for name in brainmem_ros.__all__:
        assert getattr(brainmem_ros, name) is not None


def test_one_exception_tree():
    for name in ("InvalidRequest", "StoreUnavailable", "EmbedderUnavailable", "ConfigError"):
        assert issubclass(getattr(brainmem_ros, name), brainmem_ros.BrainMemError)


def test_the_core_imports_nothing_from_ros():
    code = ("import sys, brainmem_ros.memory, brainmem_ros.bench.core, brainmem_ros.retrieval_eval; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rosidl_runtime_py', 'rpyutils')];"
            "print(bad)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
