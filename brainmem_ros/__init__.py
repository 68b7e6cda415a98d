"""brainmem_ros: brain-inspired, evolving memory for LLM-driven robots.

The public surface is ``__all__`` (pinned by a test); names load on first use, so importing the
generated interfaces (``brainmem_ros.msg``) does not pull in the model runtime.

The generated ROS interfaces (``brainmem_ros.msg``, ``brainmem_ros.srv``) are installed beside this
package by the CMake build. ``extend_path`` lets a checkout of the sources that comes first on
``sys.path`` (running from the repository root) still find them in the installed copy.
"""
from importlib import import_module
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"

_EXPORTS = {
    "BrainMemory": "core.memory",
    "MemoryConfig": "core.config", "ConfigError": "core.config",
    "RetrievalRequest": "core.retrieval", "RetrievalResult": "core.retrieval",
    "Event": "core.encoding",
    "Entry": "core.trace", "Trace": "core.trace", "Recall": "core.trace", "Zone": "core.trace",
    "Relation": "core.trace", "Position": "core.trace", "Goal": "core.trace",
    "GoalStatus": "core.trace", "TraceKind": "core.trace",
    "BrainMemError": "core.errors", "InvalidRequest": "core.errors",
    "StoreUnavailable": "core.errors", "EmbedderUnavailable": "core.errors",
    "TimeUnavailable": "core.errors", "NotServing": "core.errors",
    "MiniLMEmbedder": "core.embedding", "HashingEmbedder": "core.embedding",
}  # yapf: disable

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(f"brainmem_ros.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'brainmem_ros' has no attribute {name!r}")
