"""HNSW graphs over a partition's rows, and the settings they are built with.

A graph is a FAISS HNSW index whose labels stand for row positions of one partition, with per label
whether it may be returned at all (``live``) and by default (``current``). Searches hand FAISS a
bitmap of allowed labels, so rows that must not be returned cannot starve the result. A label
stands for one row and for its twins, the later rows with an identical vector (``twins.py``): its
flags are those of any of its rows, and a hit is every one of them, for the caller to filter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import faiss
import numpy as np

from brainmem_ros.core.store.rows import RowVectors
from brainmem_ros.core.store.twins import keys_of, vector_keys

__all__ = ["IndexSettings", "Graph", "Rebuild", "insert_on_one_thread", "limit_blas_threads",
           "top_indices"]


@dataclass(frozen=True)
class IndexSettings:
    """How the graphs are built and searched (``store.*`` in the configuration sets them).

    Graph insertions run on the other core beside ingest, and slow it (shared caches and memory
    bandwidth), so graphs start light (a small degree and efConstruction) and early (``exact_below``
    rows), and only large graphs pay for a higher degree. The measurements behind each default are
    in docs/design.md ("Vector index").
    """

    dim: int = 384
    exact_below: int = 10000
    hnsw_m: int = 16
    hnsw_ef_construction: int = 40
    hnsw_ef_search: int = 128
    regraph_share: float = 0.25
    ef_reference_rows: int = 40000
    history_m: int = 16
    history_ef_construction: int = 40
    large_rows: int = 100000
    large_m: int = 24
    ram_precision: str = "float32"
    rescore_factor: int = 2
    training_rows: int = 20000

    @property
    def compact(self) -> bool:
        """Vectors in RAM as int8: rows per-row scaled, graphs scalar-quantised (``rows.py``)."""
        return self.ram_precision == "int8"

    def m_for(self, rows: int) -> int:
        """Return the degree of a current graph built for ``rows``.

        A small degree stops being enough as a graph grows: recall at the same latency falls. Small
        graphs keep the cheaper degree; one that grows past ``large_rows`` is rebuilt in the
        background with ``large_m``.
        """
        return self.large_m if rows >= self.large_rows > 0 else self.hnsw_m

    def ef_for(self, rows: int) -> int:
        """Return efSearch for a graph of ``rows``.

        ``hnsw_ef_search`` up to ``ef_reference_rows``, then growing as (rows / reference)^0.75: a
        fixed efSearch loses recall as the graph grows.
        """
        if rows <= self.ef_reference_rows or self.ef_reference_rows <= 0:
            return self.hnsw_ef_search
        return min(4096, round(self.hnsw_ef_search * (rows / self.ef_reference_rows)**0.75))


class Graph:
    """One HNSW graph over some of a partition's rows.

    The row position behind each label, and per label whether it may be returned at all (``live``)
    and by default (``current``).

    The flags follow the rows as they are superseded or deleted, so a default query hands FAISS a
    ready bitmap instead of gathering one from the rows, and ``blocked`` says how much of the graph
    a default walk has to step over.
    """

    def __init__(self, settings: IndexSettings, index: Optional[faiss.IndexHNSW] = None,
                 history: bool = False, rows: int = 0):
        """Wrap ``index``, or make an empty graph for ``rows`` rows (its degree: ``m_for``)."""
        if index is None:
            # The history graph has settings of its own: it only grows (no rebuild gives it a
            # larger degree later), and its rows are superseded facts, many of them near copies
            # of one fact seen again and again, over which a light graph lost recall.
            m, ef_construction = ((settings.history_m,
                                   settings.history_ef_construction) if history else
                                  (settings.m_for(rows), settings.hnsw_ef_construction))
            if settings.compact:  # trained by ``prepare`` before its first rows
                index = faiss.IndexHNSWSQ(settings.dim, faiss.ScalarQuantizer.QT_8bit, m,
                                          faiss.METRIC_INNER_PRODUCT)
            else:
                index = faiss.IndexHNSWFlat(settings.dim, m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = ef_construction
        self.settings = settings
        self.index = index
        self.m = int(index.hnsw.nb_neighbors(1))
        self.count = 0
        self.pos = np.zeros(0, dtype=np.int64)  # -1: a saved label whose row no longer exists
        self.live = np.zeros(0, dtype=bool)
        self.current = np.zeros(0, dtype=bool)
        self.blocked = 0
        self.twins: dict[int, list[int]] = {}  # label -> the other rows it stands for
        self.twin_labels = np.zeros(0, dtype=np.int64)
        self.twin_pos = np.zeros(0, dtype=np.int64)
        self.twin_count = 0
        self._keys: Optional[dict[int, int]] = None  # vector key -> label, made on first match
        # per flag ("live", "current"): packed bitmap, labels set, FAISS parameters selecting them
        self._packed: dict[str, tuple[np.ndarray, int, faiss.SearchParametersHNSW]] = {}

    def prepare(self, sample: Callable[[], np.ndarray]) -> None:
        """Before the first insertion, learn a quantised graph's value ranges from ``sample()``."""
        if not self.index.is_trained:
            self.index.train(np.ascontiguousarray(sample()))

    def append_labels(self, positions: np.ndarray, live: np.ndarray, current: np.ndarray) -> None:
        n = len(positions)
        if self.count + n > len(self.pos):
            cap = max(self.count + n, 2 * len(self.pos), 64)
            for name in ("pos", "live", "current"):
                old = getattr(self, name)
                new = np.zeros(cap, dtype=old.dtype)
                new[:self.count] = old[:self.count]
                setattr(self, name, new)
        sl = slice(self.count, self.count + n)
        self.pos[sl], self.live[sl], self.current[sl] = positions, live, current
        self._packed.clear()
        self.count += n
        self.blocked += n - int(np.count_nonzero(current))

    def flag(self, label: int, live: bool, current: bool) -> None:
        self.blocked += int(self.current[label]) - int(current)
        self.live[label], self.current[label] = live, current
        self._packed.clear()

    def add_twins(self, labels: np.ndarray, positions: np.ndarray, live: np.ndarray,
                  current: np.ndarray) -> None:
        """Let ``labels`` stand also for the rows at ``positions`` (with those rows' flags)."""
        if not len(labels):
            return
        touched = np.unique(labels)
        was_current = int(np.count_nonzero(self.current[touched]))
        np.logical_or.at(self.live, labels, live)
        np.logical_or.at(self.current, labels, current)
        self._packed.clear()
        self.blocked -= int(np.count_nonzero(self.current[touched])) - was_current
        end = self.twin_count + len(labels)
        if end > len(self.twin_pos):
            cap = max(end, 2 * len(self.twin_pos), 64)
            self.twin_labels = np.resize(self.twin_labels, cap)
            self.twin_pos = np.resize(self.twin_pos, cap)
        self.twin_labels[self.twin_count:end] = labels
        self.twin_pos[self.twin_count:end] = positions
        self.twin_count = end
        for label, pos in zip(labels.tolist(), positions.tolist()):
            self.twins.setdefault(label, []).append(pos)

    def members(self, label: int) -> np.ndarray:
        """Row positions ``label`` stands for (its first row -1 once that row is gone)."""
        return np.array([self.pos[label], *self.twins.get(label, ())], dtype=np.int64)

    def reflag(self, label: int, dead: np.ndarray, hidden: np.ndarray) -> None:
        """Set ``label``'s flags from its rows' (``dead``, ``hidden``: the partition's per row)."""
        rows = self.members(label)
        rows = rows[rows >= 0]
        alive = ~dead[rows]
        self.flag(label, bool(alive.any()), bool((alive & ~hidden[rows]).any()))

    def labels_allowed(self, rows_allowed: np.ndarray) -> np.ndarray:
        """Per label, whether any of its rows is allowed (``rows_allowed`` ends in one False)."""
        last = len(rows_allowed) - 1
        pos = self.pos[:self.count]
        allowed = rows_allowed[np.where((pos >= 0) & (pos < last), pos, last)]
        if self.twin_count:
            pos = self.twin_pos[:self.twin_count]
            hit = rows_allowed[np.where(pos < last, pos, last)]
            allowed[self.twin_labels[:self.twin_count][hit]] = True
        return allowed

    def remember(self, keys: np.ndarray) -> None:
        """Take ``keys`` (``vector_keys``) as those of labels 0, 1, ... (for ``place``)."""
        self._keys = dict(zip(keys.tolist(), range(len(keys))))

    def place(self, vectors: np.ndarray,
              take: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Decide which of ``vectors`` (rows about to enter) need a node; the others are twins.

        Returns ``(new, labels)``: whether each row needs a node of its own, and its label (the
        nodes to be added get the next labels in order). ``take(positions)`` returns rows' vectors.
        """
        if self._keys is None:
            labels = np.flatnonzero(self.pos[:self.count] >= 0)
            self._keys = dict(zip(keys_of(take, self.pos[labels]).tolist(), labels.tolist()))
        keys = vector_keys(vectors).tolist()
        labels = np.array([self._keys.get(key, -1) for key in keys], dtype=np.int64)
        known = np.flatnonzero(labels >= 0)
        if len(known):
            origin = self.pos[labels[known]]
            same = origin >= 0
            same[same] = (take(origin[same]) == vectors[known[same]]).all(axis=1)
            labels[known[~same]] = -1
        new = labels < 0
        first: dict[int, int] = {}  # key -> the row of this batch that brings it
        next_label = self.count
        for i in np.flatnonzero(new).tolist():
            j = first.get(keys[i])
            if j is not None and np.array_equal(vectors[i], vectors[j]):
                labels[i], new[i] = labels[j], False
                continue
            first.setdefault(keys[i], i)
            labels[i] = next_label
            self._keys[keys[i]] = next_label
            next_label += 1
        return new, labels

    def search(self, query: np.ndarray, k: int, allowed: Optional[np.ndarray] = None,
               share: float = 1.0, hidden: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Search the labels ``allowed`` sets: rows of the best ``k``, with similarities.

        ``allowed`` None: the labels the flags allow (``live`` with ``hidden``, else ``current``),
        whose bitmap and FAISS parameters are kept until a flag changes, as a query runs far more
        often than the flags change. The walk itself skips the others (a FAISS selector over a
        bitmap), so they cannot starve the result. A label's rows are all returned, its twins
        included, and may hold rows the caller does not allow (a label is allowed when any of its
        rows is) or -1 (a row gone since a save).
        ``share``: this graph's part of the rows a query walks in several graphs; its
        candidate list shrinks with it (never below ``2 k``), so that walking two graphs costs about
        what one graph of them all would, not twice that.
        """
        if allowed is None:
            bits, n_allowed, params = self._flagged("live" if hidden else "current")
        else:
            bits, n_allowed, params = self._selecting(allowed)
        if n_allowed == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        ef = self.settings.ef_for(self.count)
        ef = max(round(ef * share), min(ef, 2 * k), k)
        if params.efSearch != ef:
            params.efSearch = ef
        sims, labels = self.index.search(query.reshape(1, -1), min(k, n_allowed), params=params)
        del bits  # held until here: the selector reads it and SWIG does not keep it
        found = labels[0] >= 0
        labels, sims = labels[0][found], sims[0][found].astype(np.float32)
        positions = self.pos[labels]
        if self.twin_count:
            shared, counts = [], []
            for label in labels.tolist():
                rows = self.twins.get(label, ())
                shared += rows
                counts.append(len(rows))
            if shared:
                positions = np.concatenate([positions, np.array(shared, dtype=np.int64)])
                sims = np.concatenate([sims, np.repeat(sims, counts)])
        return positions, sims

    def _flagged(self, flag: str) -> tuple[np.ndarray, int, faiss.SearchParametersHNSW]:
        kept = self._packed.get(flag)
        if kept is None:
            kept = self._packed[flag] = self._selecting(getattr(self, flag)[:self.count])
        return kept

    @staticmethod
    def _selecting(allowed: np.ndarray) -> tuple[np.ndarray, int, faiss.SearchParametersHNSW]:
        """Return a bitmap of ``allowed``, how many it sets, and parameters selecting them."""
        bits = np.packbits(allowed, bitorder="little")
        params = faiss.SearchParametersHNSW()
        # FAISS bounds the bitmap by its length in bytes; the caller holds ``bits`` while it runs.
        params.sel = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
        return bits, int(np.count_nonzero(allowed)), params


_BLAS_LIMITED = False


def limit_blas_threads() -> None:
    """Keep BLAS to one thread in this process, once.

    Exact search is a matrix-vector product of a few MB: one BLAS thread does it as fast, and idle
    OpenBLAS threads busy-wait, starving the embedding model's threads on a small CPU.
    """
    global _BLAS_LIMITED
    if not _BLAS_LIMITED:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
        _BLAS_LIMITED = True


def insert_on_one_thread() -> None:
    """Run graph insertions of the calling thread on one OpenMP thread.

    For the calling thread only (OpenMP keeps the setting per thread). The background indexer
    inserts while ingest writes SQLite on the other core, and two OpenMP threads beside it
    busy-wait for each other's share. Builds at start, with nothing else running, keep every core.
    """
    faiss.omp_set_num_threads(1)


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    if len(scores) <= k:
        return np.argsort(-scores)
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part])]


@dataclass
class Rebuild:
    """A new current graph being built, a chunk at a time, from the rows current when it began."""

    epoch: int
    vectors: RowVectors  # the rows as they were: rows below its length never change
    positions: np.ndarray  # one row per distinct vector: the graph's labels, in order
    graph: Graph
    twins: np.ndarray  # the other rows, each sharing the label ``twin_of`` gives it
    twin_of: np.ndarray
    keys: np.ndarray  # of ``positions``' vectors (``vector_keys``)
    done: int = 0
