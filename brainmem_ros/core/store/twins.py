"""Rows whose vectors are identical, found so that a graph holds each such vector once.

A robot's routine repeats word for word (the timer rang in the kitchen again), and each occurrence
is a memory of its own with the same embedding. In a graph every copy was a node of its own: on the
bench's million memories a third of the insertions were copies, and clusters of identical nodes
crowded the walks. A graph now inserts a vector once and lets every row holding it share that node
(its twins); flags and filters still apply per row.

Rows are matched by a 64-bit key of their vector's bytes and then compared in full, so two rows
share a node only when their vectors are equal, never merely when their keys collide.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["vector_keys", "keys_of", "group_identical"]

_CHUNK = 8192  # rows compared at a time, so grouping never copies a partition's vectors whole
_MULTIPLIERS = np.random.default_rng(20261207).integers(
    1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)


def vector_keys(vectors: np.ndarray) -> np.ndarray:
    """Return a 64-bit key per row, equal for equal rows (float32 bytes, mixed and weighted)."""
    words = np.ascontiguousarray(vectors, dtype=np.float32).view(np.uint32).astype(np.uint64)
    words ^= words << np.uint64(29)
    weights = np.resize(_MULTIPLIERS, words.shape[1])
    with np.errstate(over="ignore"):
        return (words * weights).sum(axis=1, dtype=np.uint64)


def keys_of(take: Callable[[np.ndarray], np.ndarray], positions: np.ndarray) -> np.ndarray:
    """Return ``vector_keys`` of the rows at ``positions``, ``take(rows)`` giving their vectors."""
    return np.concatenate([np.zeros(0, dtype=np.uint64)] + [
        vector_keys(take(positions[s:s + _CHUNK])) for s in range(0, len(positions), _CHUNK)])


def group_identical(take: Callable[[np.ndarray], np.ndarray],
                    positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split ``positions`` into one row per distinct vector and the twins of those rows.

    ``take(rows)`` returns the rows' vectors. Returns ``(firsts, twins, twin_of, keys)``: the first
    row of each distinct vector in the order given, the other rows, for each of them the index into
    ``firsts`` of the row whose vector it has, and the firsts' keys (``vector_keys``).
    """
    positions = np.asarray(positions, dtype=np.int64)
    keys = keys_of(take, positions)
    if len(positions) < 2:
        return positions, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), keys
    _, first_of_key, which = np.unique(keys, return_index=True, return_inverse=True)
    candidate = first_of_key[which.ravel()]  # per row: the first row with its key
    twin = np.flatnonzero(candidate != np.arange(len(positions)))
    same = np.ones(len(twin), dtype=bool)
    for s in range(0, len(twin), _CHUNK):
        part = twin[s:s + _CHUNK]
        same[s:s + len(part)] = (take(positions[part])
                                 == take(positions[candidate[part]])).all(axis=1)
    twin = twin[same]  # equal keys, unequal vectors: each stays a node of its own
    is_first = np.ones(len(positions), dtype=bool)
    is_first[twin] = False
    rank = np.cumsum(is_first) - 1
    return positions[is_first], positions[twin], rank[candidate[twin]], keys[is_first]
