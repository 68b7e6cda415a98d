"""Vector recall over one partition of long-term memory (one agent's, or the shared, entries of one
zone), exact while small and HNSW when large.

Partitioning by (owner, zone) is the metadata pre-filter: a query filtered on agent and zone searches
only the partitions it may see, so the filter costs nothing and never starves an approximate index
of candidates. Within a partition, rows excluded from default retrieval (superseded facts) stay in
the index and are filtered by a mask, so history queries can still reach them; deleted rows are
tombstoned until the partition is compacted.

Rows enter the graph behind the write, not in it: new rows join the partition's arrays at once (the
"tail", searched exactly) and ``index_tail`` moves them into the graph in small chunks, which
``LongTermStore`` does on a background thread. Inserting into HNSW is the most expensive step of an
ingest (about 80 us a row at 100k); FAISS runs it without the interpreter lock, so it overlaps the
next batch's SQLite work on another core, and a retrieval never waits behind more than one chunk.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import faiss
import numpy as np
from tqdm import tqdm

__all__ = ["IndexSettings", "Partition"]


@dataclass(frozen=True)
class IndexSettings:
    dim: int = 384
    exact_below: int = 20000
    hnsw_m: int = 24
    hnsw_ef_construction: int = 64
    hnsw_ef_search: int = 256


class Partition:
    """Vectors, rowids, creation times and flags of one partition, with an optional HNSW graph."""

    def __init__(self, settings: IndexSettings):
        self.settings = settings
        # FAISS's HNSW must not be searched while it grows; the indexer copies rows while ingest
        # appends them. Lock order: graph, then rows.
        self._graph_lock = threading.Lock()
        self._rows_lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._vectors = np.zeros((0, self.settings.dim), dtype=np.float32)
        self._rowids = np.zeros(0, dtype=np.int64)
        self._created = np.zeros(0, dtype=np.float64)
        self._hidden = np.zeros(0, dtype=bool)   # superseded: skipped unless asked for
        self._dead = np.zeros(0, dtype=bool)     # deleted or archived: never returned
        self.size = 0
        self.position: dict[int, int] = {}
        self.hnsw: Optional[faiss.IndexHNSWFlat] = None
        self.indexed = 0  # rows [0, indexed) are in the graph; the rest, the tail, is searched exactly

    # -- content -----------------------------------------------------------------------------
    def add(self, rowids: np.ndarray, vectors: np.ndarray, created: np.ndarray,
            hidden: Optional[np.ndarray] = None) -> None:
        n = len(rowids)
        if n == 0:
            return
        with self._rows_lock:
            self._reserve(self.size + n)
            sl = slice(self.size, self.size + n)
            self._vectors[sl] = vectors
            self._rowids[sl] = rowids
            self._created[sl] = created
            self._hidden[sl] = False if hidden is None else hidden
            self._dead[sl] = False
            for offset, rowid in enumerate(rowids.tolist()):
                self.position[rowid] = self.size + offset
            self.size += n
        if self.hnsw is None and self.alive_count() >= self.settings.exact_below:
            with self._graph_lock:
                self.hnsw, self.indexed = self._new_graph(), 0  # filled from the tail by index_tail

    @property
    def tail(self) -> int:
        """Rows waiting to enter the graph (0 for an exact partition)."""
        return self.size - self.indexed if self.hnsw is not None else 0

    def index_tail(self, max_rows: int) -> int:
        """Move up to ``max_rows`` rows of the tail into the graph; returns how many moved."""
        with self._graph_lock:
            if self.hnsw is None:
                return 0
            with self._rows_lock:
                start, stop = self.indexed, min(self.size, self.indexed + max_rows)
                if stop <= start:
                    return 0
                chunk = np.ascontiguousarray(self._vectors[start:stop])  # a copy: _reserve may swap arrays
            self.hnsw.add(chunk)
            self.indexed = stop
            return stop - start

    def _reserve(self, n: int) -> None:
        if n <= len(self._rowids):
            return
        cap = max(n, 2 * len(self._rowids), 64)
        for name in ("_vectors", "_rowids", "_created", "_hidden", "_dead"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)

    def set_hidden(self, rowid: int, hidden: bool) -> None:
        pos = self.position.get(rowid)
        if pos is not None:
            self._hidden[pos] = hidden

    def remove(self, rowid: int) -> bool:
        pos = self.position.pop(rowid, None)
        if pos is None:
            return False
        self._dead[pos] = True
        return True

    def alive_count(self) -> int:
        return len(self.position)

    def needs_compaction(self) -> bool:
        return self.size > 1024 and self.alive_count() < 0.7 * self.size

    def compact(self) -> None:
        """Drop tombstoned rows (and rebuild the graph, which cannot delete in place)."""
        with self._graph_lock, self._rows_lock:
            keep = ~self._dead[: self.size]
            vectors, rowids = self._vectors[: self.size][keep], self._rowids[: self.size][keep]
            created, hidden = self._created[: self.size][keep], self._hidden[: self.size][keep]
            had_graph = self.hnsw is not None
            self._reset()
            self._load_arrays(rowids, vectors, created, hidden)
            if had_graph and len(rowids) >= self.settings.exact_below:
                self._build_locked()

    def _load_arrays(self, rowids, vectors, created, hidden) -> None:
        self._reserve(len(rowids))
        n = len(rowids)
        self._vectors[:n], self._rowids[:n], self._created[:n], self._hidden[:n] = vectors, rowids, created, hidden
        self._dead[:n] = False
        self.position = {r: i for i, r in enumerate(rowids.tolist())}
        self.size = n

    def vector(self, rowid: int) -> Optional[np.ndarray]:
        pos = self.position.get(rowid)
        return None if pos is None else self._vectors[pos]

    # -- graph ------------------------------------------------------------------------------
    def _new_graph(self) -> faiss.IndexHNSWFlat:
        s = self.settings
        index = faiss.IndexHNSWFlat(s.dim, s.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = s.hnsw_ef_construction
        index.hnsw.efSearch = s.hnsw_ef_search
        return index

    def build_hnsw(self) -> None:
        """Build the graph over every row now (at start, when no saved graph fits)."""
        with self._graph_lock:
            self._build_locked()

    def _build_locked(self) -> None:
        index = self._new_graph()
        step = 10000
        with tqdm(total=self.size, desc="building the vector index", unit="vec", leave=False,
                  disable=self.size < 50000) as bar:
            for start in range(0, self.size, step):
                chunk = self._vectors[start:min(self.size, start + step)]
                index.add(np.ascontiguousarray(chunk))
                bar.update(len(chunk))
        self.hnsw, self.indexed = index, self.size

    def save_graph(self, path: Path) -> None:
        """Save the graph with the rowids it indexes (the tail is not in it yet)."""
        with self._graph_lock:
            if self.hnsw is None:
                return
            partial = path.with_suffix(".partial")
            faiss.write_index(self.hnsw, str(partial))
            np.save(partial.with_suffix(".rowids.npy"), self._rowids[: self.indexed])
            partial.with_suffix(".rowids.npy").replace(path.with_suffix(".rowids.npy"))
            partial.replace(path)

    def load_graph(self, path: Path) -> bool:
        """Adopt a saved graph if it indexes this partition's first rows, in this order: rows added
        after the save (a crash before the next one) become the tail instead of forcing a rebuild."""
        try:
            saved_rowids = np.load(path.with_suffix(".rowids.npy"))
            if len(saved_rowids) > self.size or not np.array_equal(saved_rowids, self._rowids[: len(saved_rowids)]):
                return False
            index = faiss.read_index(str(path))
        except (OSError, ValueError, RuntimeError):
            return False
        if index.ntotal != len(saved_rowids) or index.d != self.settings.dim or not len(saved_rowids):
            return False
        index.hnsw.efSearch = self.settings.hnsw_ef_search
        with self._graph_lock:
            self.hnsw, self.indexed = index, len(saved_rowids)
        return True

    # -- search -----------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int, since: float = 0.0, until: float = 0.0,
               include_hidden: bool = False, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` (rowids, cosine similarities) among rows passing the filters."""
        n = self.size
        if n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        _limit_blas_threads()
        allowed = ~self._dead[:n] if include_hidden else ~(self._dead[:n] | self._hidden[:n])
        if since:
            allowed &= self._created[:n] >= since
        if until:
            allowed &= self._created[:n] <= until
        n_allowed = int(np.count_nonzero(allowed))
        if n_allowed == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        # A selective filter makes the graph walk wasteful: score the few allowed rows directly.
        if n_allowed < max(4 * k, n // 10):
            idx = np.flatnonzero(allowed)
            sims = self._vectors[idx] @ query
            top = _top(sims, k)
            return self._rowids[idx[top]], sims[top]
        if exact or self.hnsw is None:
            sims = self._vectors[:n] @ query  # in place over the whole slice: no copy of the matrix
            sims[~allowed] = -np.inf
            top = _top(sims, min(k, n_allowed))
            return self._rowids[top], sims[top]
        # The graph walk itself skips filtered rows (FAISS selector over a bitmap of allowed rows), so
        # many superseded facts cannot starve the result and no second walk is needed.
        with self._graph_lock:
            m = min(self.indexed, n)
            labels = np.zeros(0, dtype=np.int64)
            sims = np.zeros(0, dtype=np.float32)
            graph_allowed = int(np.count_nonzero(allowed[:m]))
            if graph_allowed:
                bits = np.packbits(allowed[:m], bitorder="little")
                params = faiss.SearchParametersHNSW()
                params.efSearch = max(self.settings.hnsw_ef_search, k)
                selector = faiss.IDSelectorBitmap(m, faiss.swig_ptr(bits))  # held: SWIG does not keep it alive
                params.sel = selector
                found_sims, found = self.hnsw.search(query.reshape(1, -1), min(k, graph_allowed), params=params)
                del selector, bits
                valid = found[0] >= 0
                labels, sims = found[0][valid], found_sims[0][valid].astype(np.float32)
        if m < n:  # the tail, not in the graph yet: scored exactly
            tail = np.flatnonzero(allowed[m:n]) + m
            labels = np.concatenate([labels, tail])
            sims = np.concatenate([sims, (self._vectors[tail] @ query).astype(np.float32)])
            top = _top(sims, k)
            labels, sims = labels[top], sims[top]
        return self._rowids[labels], sims


_BLAS_LIMITED = False


def _limit_blas_threads() -> None:
    """Exact search is a matrix-vector product of a few MB: one BLAS thread does it as fast, and
    idle OpenBLAS threads busy-wait, starving the embedding model's threads on a small CPU (measured:
    query-embedding retrievals at 10k memories went from ~4 to ~8 ms p50 beside them)."""
    global _BLAS_LIMITED
    if not _BLAS_LIMITED:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
        _BLAS_LIMITED = True


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    if len(scores) <= k:
        return np.argsort(-scores)
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part])]
