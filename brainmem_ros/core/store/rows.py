"""A partition's vectors in RAM: float32, or int8 codes with one scale per row.

At a million memories the float32 copy of every vector is 1.5 GB by itself, more than a small
robot computer can give the store beside its planner and perception. A partition searched exactly
(no graph yet) keeps float32 all the same: it scores every row on every query, and converting its
codes each time cost more than the memory it saves. int8 codes scaled per row
(the row's largest component maps to 127) keep a unit vector's components within half a step of
their value, so a cosine computed from them moves by about a thousandth; SQLite keeps the stored
precision, so nothing is lost for good and a store can be reopened in either mode.

Both kinds answer the same few operations the partition needs (take rows as float32, dot rows
with a query, grow), so the partition's code does not depend on which one it holds.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np

__all__ = ["RowVectors", "RAM_PRECISIONS"]

RAM_PRECISIONS = ("float32", "int8")
_CHUNK = 65536  # rows decoded at a time by a full scan, so a scan never doubles the RAM it reads

Rows = Union[slice, np.ndarray]


class RowVectors:
    """A growable matrix of row vectors, held as float32 or as per-row scaled int8."""

    def __init__(self, dim: int, precision: str = "float32", capacity: int = 0):
        if precision not in RAM_PRECISIONS:
            raise ValueError(f"RAM precision must be one of {', '.join(RAM_PRECISIONS)}")
        self.dim = dim
        self.precision = precision
        self.compact = precision == "int8"
        self._codes = np.zeros((capacity, dim), dtype=np.int8 if self.compact else np.float32)
        self._scales = np.zeros(capacity if self.compact else 0, dtype=np.float32)

    def __len__(self) -> int:
        return len(self._codes)

    @property
    def nbytes(self) -> int:
        return self._codes.nbytes + self._scales.nbytes

    def grown(self, capacity: int, keep: int) -> "RowVectors":
        """Return a copy with room for ``capacity`` rows holding this one's first ``keep``.

        This one itself when it already has exactly that room (no second copy while a store opens).
        """
        if capacity == len(self):
            return self
        new = RowVectors(self.dim, self.precision, capacity)
        new._codes[:keep] = self._codes[:keep]
        if self.compact:
            new._scales[:keep] = self._scales[:keep]
        return new

    def as_precision(self, precision: str, size: int) -> "RowVectors":
        """Return this one in ``precision`` (itself if it is already), its first ``size`` rows."""
        if precision == self.precision:
            return self
        new = RowVectors(self.dim, precision, len(self))
        for at in range(0, size, _CHUNK):
            end = min(size, at + _CHUNK)
            new.put(slice(at, end), self.take(slice(at, end)))
        return new

    def arrays(self, size: int) -> dict[str, np.ndarray]:
        """Return the first ``size`` rows as held: ``codes`` (and ``scales`` for int8)."""
        held = {"codes": self._codes[:size]}
        if self.compact:
            held["scales"] = self._scales[:size]
        return held

    @classmethod
    def from_arrays(cls, dim: int, codes: np.ndarray,
                    scales: Optional[np.ndarray] = None) -> "RowVectors":
        """Hold ``codes`` as they are (int8 with ``scales``, or float32), refusing a mismatch."""
        precision = "int8" if codes.dtype == np.int8 else "float32"
        if codes.ndim != 2 or codes.shape[1] != dim or (precision == "float32") != (
                codes.dtype == np.float32) or (precision == "int8") != (scales is not None):
            raise ValueError(f"not {dim}-d rows: {codes.dtype} {codes.shape}")
        if scales is not None and scales.shape != (len(codes), ):
            raise ValueError("one scale per row")
        rows = cls(dim, precision)
        rows._codes = codes
        if scales is not None:
            rows._scales = scales.astype(np.float32, copy=False)
        return rows

    def subset(self, rows: np.ndarray) -> "RowVectors":
        """Return a new ``RowVectors`` of just ``rows``, in their order, without decoding them."""
        new = RowVectors(self.dim, self.precision)
        new._codes = self._codes[rows]
        new._scales = self._scales[rows] if self.compact else new._scales
        return new

    def put(self, rows: Rows, vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if not self.compact:
            self._codes[rows] = vectors
            return
        peak = np.abs(vectors).max(axis=1)
        scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        self._codes[rows] = np.rint(vectors / scales[:, None]).astype(np.int8)
        self._scales[rows] = scales

    def take(self, rows: Rows) -> np.ndarray:
        """Return the rows as a new float32 matrix."""
        if not self.compact:
            return np.array(self._codes[rows], dtype=np.float32)
        return self._codes[rows].astype(np.float32) * self._scales[rows][:, None]

    def dot(self, rows: Rows, query: np.ndarray) -> np.ndarray:
        """Cosine of each of ``rows`` with ``query`` (the vectors are unit length)."""
        query = np.asarray(query, dtype=np.float32)
        if not self.compact:
            return (self._codes[rows] @ query).astype(np.float32, copy=False)
        if isinstance(rows, slice):
            start, stop, _ = rows.indices(len(self._codes))
            out = np.empty(max(0, stop - start), dtype=np.float32)
            for at in range(start, stop, _CHUNK):
                end = min(stop, at + _CHUNK)
                out[at - start:end - start] = self._codes[at:end].astype(np.float32) @ query
            return out * self._scales[start:stop]
        out = np.empty(len(rows), dtype=np.float32)
        for at in range(0, len(rows), _CHUNK):
            part = rows[at:at + _CHUNK]
            out[at:at + len(part)] = self._codes[part].astype(np.float32) @ query
        return out * self._scales[rows]

    def sample(self, rows: np.ndarray, limit: int, seed: int = 0) -> np.ndarray:
        """At most ``limit`` of ``rows``, chosen evenly at random, as float32 (graph training)."""
        if len(rows) > limit:
            rows = np.sort(np.random.default_rng(seed).choice(rows, limit, replace=False))
        return self.take(rows)
