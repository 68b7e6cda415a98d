"""Time for the memory: whatever clock the robot runs on, the wall clock when there is none.

Every stamp, recency, decay and forgetting pass of the core reads one clock, so memories stamped
with a robot's or a bag's time are compared with that time, never with this machine's wall clock.
Under ROS the nodes pass their node clock (which follows ``/clock`` with ``use_sim_time``); used
without ROS, the core reads the wall clock.
"""
from __future__ import annotations

import time
from typing import Callable

__all__ = ["Clock", "wall_clock"]

# Seconds, on the robot's time line. A clock that has no time yet (simulated time before the first
# /clock message) raises ``errors.TimeUnavailable``.
Clock = Callable[[], float]


def wall_clock() -> float:
    """Return this machine's time, in seconds since the Unix epoch."""
    return time.time()
