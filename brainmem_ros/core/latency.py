"""Latency figures: one definition of a percentile for every figure the package prints.

``percentile(values, q)`` is the linear interpolation between the two nearest ranks (numpy's
default method, the one ``numpy.percentile`` and most benchmark tools report): the benchmark, the
load test, the evaluations and the diagnostics all use it, so their p50 and p99 are the same
statistic.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Callable, Optional, Sequence

import numpy as np

__all__ = ["percentile", "PERCENTILE_DEFINITION", "LatencyWindow"]

PERCENTILE_DEFINITION = "linear interpolation between the two nearest ranks (numpy's default)"


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """Return the value ``q`` percent (0-100) of ``values`` lie below, or None for no values."""
    if not 0.0 <= q <= 100.0 or math.isnan(q):
        raise ValueError(f"a percentile is within [0, 100], not {q}")
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


class LatencyWindow:
    """Durations of the last ``span_s`` seconds, for live figures (diagnostics' p50 and p99).

    Kept on a monotonic clock: what happened in the last minute is a question about elapsed time,
    whatever the robot's clock (simulated, replayed) says. Bounded by ``max_samples``, the newest
    kept, so a burst of calls cannot grow it without limit.
    """

    def __init__(self, span_s: float = 60.0, max_samples: int = 100_000,
                 clock: Callable[[], float] = time.monotonic):
        self.span_s = span_s
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self._clock = clock
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self._samples.append((self._clock(), seconds))

    def recent(self) -> list[float]:
        """Return the durations (seconds) of the last ``span_s`` seconds, oldest first."""
        cutoff = self._clock() - self.span_s
        with self._lock:
            while self._samples and self._samples[0][0] < cutoff:
                self._samples.popleft()
            return [seconds for _, seconds in self._samples]
