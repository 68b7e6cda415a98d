"""The one exception tree of brainmem_ros.

Everything the core raises on purpose derives from ``BrainMemError``, and its message is written to
be passed on as-is in a service response's ``message`` field. Nodes catch ``BrainMemError`` and
answer ``success: false``; anything else is a bug.
"""

__all__ = [
    "BrainMemError", "InvalidRequest", "StoreUnavailable", "EmbedderUnavailable", "TimeUnavailable",
    "NotServing"
]


class BrainMemError(Exception):
    """Base of every error brainmem_ros raises deliberately."""


class InvalidRequest(BrainMemError, ValueError):
    """The caller's arguments are unusable (empty query, bad top_k, unknown zone, NaN embedding...).

    Raised before anything is written, so the store is unchanged.
    """


class StoreUnavailable(BrainMemError):
    """The long-term store cannot be opened or written (missing folder, read-only file, full disk).

    What was committed before the failure stays on disk.
    """


class EmbedderUnavailable(BrainMemError):
    """The embedding model cannot be loaded (package missing, files damaged)."""


class TimeUnavailable(BrainMemError):
    """The robot's clock has no time yet (simulated time before the first ``/clock`` message).

    Nothing is stamped with a made-up time: the request can be sent again once time runs.
    """


class NotServing(BrainMemError):
    """The memory is not serving now: its node is not active (a managed node's lifecycle state).

    Nothing was read or written; the same request can be sent again once the node is active.
    """
