"""Latency figures: one definition of a percentile for every figure the package prints.

``percentile(values, q)`` is the linear interpolation between the two nearest ranks (numpy's
default method, the one ``numpy.percentile`` and most benchmark tools report): the benchmark, the
load test, the evaluations and the diagnostics all use it, so their p50 and p99 are the same
statistic.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

__all__ = ["percentile", "PERCENTILE_DEFINITION"]

PERCENTILE_DEFINITION = "linear interpolation between the two nearest ranks (numpy's default)"


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """Return the value ``q`` percent (0-100) of ``values`` lie below, or None for no values."""
    if not 0.0 <= q <= 100.0 or math.isnan(q):
        raise ValueError(f"a percentile is within [0, 100], not {q}")
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))
