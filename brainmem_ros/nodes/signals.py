"""Ctrl-C and SIGTERM, held from a node process's first instant until it has closed.

A signal only asks the process to stop: the nodes finish starting (imports, the model), close in
order (producers first, the store last, so nothing acknowledged is lost) and the process exits 0.
A second signal while that happens asks again and changes nothing: Python's default handler would
raise KeyboardInterrupt in the middle of the teardown instead (what ``ros2 launch`` sends a
non-interactive process group is two of them, and launch forwards a third). Importing this module
is cheap, so the node executables call ``hold()`` before importing anything heavy.

Once the process is exiting, the signals are ignored: the interpreter puts back the default handler
while it finalises, and a signal arriving then would kill a process that had closed cleanly.
"""
import atexit
import signal
import threading

__all__ = ["hold", "requested", "STOP_SIGNALS"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_stop = threading.Event()
_held = False


def hold() -> threading.Event:
    """Make SIGINT and SIGTERM set the stop event from now on; return the event.

    Outside the main thread (where Python allows no signal handler) the event is returned as it is.
    """
    global _held
    if not _held and threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda *_: _stop.set())
        atexit.register(_ignore_while_exiting)
        _held = True
    return _stop


def _ignore_while_exiting() -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def requested() -> bool:
    """Tell whether a stop was asked for."""
    return _stop.is_set()
