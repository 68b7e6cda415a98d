"""Embeddings as SQLite blobs: float16 by default, float32 where asked or where float16 cannot hold.

float16 halves the bytes a commit writes and a restart reads, and its rounding (a relative 5e-4 per
component) is far below the noise of the int8 embedding model itself. The vectors searched are the
stored ones, read back, so a store reopened answers exactly as before. Each blob's length says
which precision it is, so stores written under either setting open alike.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from brainmem_ros.core.errors import InvalidRequest

__all__ = ["EMBEDDING_PRECISIONS", "VectorCodec"]

EMBEDDING_PRECISIONS = {"float16": np.float16, "float32": np.float32}
_FLOAT16_MAX = float(np.finfo(np.float16).max)


class VectorCodec:
    """Encodes a batch of vectors for storage and decodes stored blobs, for one dimension."""

    def __init__(self, dim: int, precision: str = "float16"):
        if precision not in EMBEDDING_PRECISIONS:
            raise InvalidRequest(
                f"embedding_precision must be one of {', '.join(EMBEDDING_PRECISIONS)},"
                f" not {precision!r}")
        self.dim = dim
        self._dtype = EMBEDDING_PRECISIONS[precision]

    def encode(self, vectors: np.ndarray) -> tuple[list[bytes], np.ndarray]:
        """Encode a batch of vectors for storage.

        The blob each row of ``vectors`` is stored as, and the vectors as they read back from it.

        The read-back vectors are what the partitions must hold, so that a reopened store searches
        the same numbers.
        """
        if self._dtype is np.float32:
            return [v.tobytes() for v in vectors], vectors
        fits = np.abs(vectors).max(axis=1) <= _FLOAT16_MAX
        with np.errstate(over="ignore"):
            half = vectors.astype(np.float16)
        back = half.astype(np.float32)
        if not fits.all():  # a component beyond float16's range: that row keeps float32
            back[~fits] = vectors[~fits]
            return [h.tobytes() if ok else v.tobytes()
                    for h, v, ok in zip(half, vectors, fits)], back
        return [h.tobytes() for h in half], back

    def decode(self, blobs: Sequence[bytes]) -> np.ndarray:
        """Embedding blobs, float16 or float32 by their length, as one float32 matrix."""
        half = 2 * self.dim
        if all(len(b) == half for b in blobs):
            return np.frombuffer(b"".join(blobs),
                                 dtype=np.float16).reshape(len(blobs), self.dim).astype(np.float32)
        if not any(len(b) == half for b in blobs):
            return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs),
                                                                            self.dim).copy()
        return np.stack([
            np.frombuffer(b, dtype=np.float16 if len(b) == half else np.float32) for b in blobs
        ]).astype(np.float32)
