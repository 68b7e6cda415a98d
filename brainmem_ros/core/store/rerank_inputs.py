"""What reranking needs of every long-term memory, kept in RAM.

What reranking needs of every long-term memory (importance, last access, creation time, source
confidence), kept in RAM so that a retrieval reads SQLite only for the few memories it returns.

One float matrix and a dict from rowid to its row, not a dict of tuples: a dict is tracked by the
garbage collector again whenever a freshly made tuple is put in it (every retrieval records its
accesses), and until the next full collection every collection walks all of it: pauses inside
retrievals longer than the retrievals. A dict of ints is never tracked.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["RerankInputs"]

IMPORTANCE, LAST_ACCESS, CREATED, CONFIDENCE = range(4)


class RerankInputs:
    """Rows of [importance, last_access, created, confidence] by rowid.

    Not locked: the store calls it under its own lock.
    """

    def __init__(self) -> None:
        self._row: dict[int, int] = {}
        self._values = np.zeros((0, 4), dtype=np.float64)
        self._used = 0
        self.newest = -np.inf  # the latest creation time ever added (health's clock check)

    def __contains__(self, rowid: int) -> bool:
        return rowid in self._row

    def __len__(self) -> int:
        return len(self._row)

    def add(self, rowids: Sequence[int], values: np.ndarray) -> None:
        """``values[i]``: the four inputs of ``rowids[i]``."""
        n = len(rowids)
        if n:
            self.newest = max(self.newest, float(np.max(values[:, CREATED])))
        if self._used + n > len(self._values):
            grown = np.zeros((max(self._used + n, 2 * len(self._values), 1024), 4),
                             dtype=np.float64)
            grown[:self._used] = self._values[:self._used]
            self._values = grown
        self._values[self._used:self._used + n] = values
        self._row.update(zip(rowids, range(self._used, self._used + n)))
        self._used += n

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Return every rowid and its row of inputs (for the store's RAM snapshot)."""
        rowids = np.fromiter(self._row.keys(), dtype=np.int64, count=len(self._row))
        rows = np.fromiter(self._row.values(), dtype=np.int64, count=len(self._row))
        return rowids, self._values[rows]

    def remove(self, rowid: int) -> None:
        self._row.pop(rowid, None)
        if self._used > 1024 and self._used > 2 * len(
                self._row):  # rows of removed memories pile up: drop them
            rows = np.fromiter(self._row.values(), dtype=np.int64, count=len(self._row))
            self._values = self._values[rows]
            self._row = dict(zip(self._row, range(len(rows))))
            self._used = len(rows)

    def touch(self, rowid: int, importance: float, last_access: float,
              confidence: Optional[float] = None) -> None:
        """Record an access, a strengthening or a new importance; unknown rowids are ignored."""
        row = self._row.get(rowid)
        if row is None:
            return
        self._values[row, IMPORTANCE] = importance
        self._values[row, LAST_ACCESS] = last_access
        if confidence is not None:
            self._values[row, CONFIDENCE] = confidence

    def of(self, rowids: Sequence[int]) -> tuple[list[int], np.ndarray]:
        """Return the rowids still present, and a copy of their rows."""
        live = [r for r in rowids if r in self._row]
        return live, self._values[[self._row[r] for r in live]]
