"""Vector recall over one partition of long-term memory (one agent's, or the shared, entries of one
zone), exact while small and HNSW when large.

Partitioning by (owner, zone) is the metadata pre-filter: a query filtered on agent and zone searches
only the partitions it may see, so the filter costs nothing and never starves an approximate index
of candidates. Within a partition, rows excluded from default retrieval (superseded facts) stay in
the index and are filtered by a mask, so history queries can still reach them; deleted rows are
tombstoned until the partition is compacted.
"""
from __future__ import annotations

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
        self._vectors = np.zeros((0, settings.dim), dtype=np.float32)
        self._rowids = np.zeros(0, dtype=np.int64)
        self._created = np.zeros(0, dtype=np.float64)
        self._hidden = np.zeros(0, dtype=bool)   # superseded: skipped unless asked for
        self._dead = np.zeros(0, dtype=bool)     # deleted or archived: never returned
        self.size = 0
        self.position: dict[int, int] = {}
        self.hnsw: Optional[faiss.IndexHNSWFlat] = None

    # -- content -----------------------------------------------------------------------------
    def add(self, rowids: np.ndarray, vectors: np.ndarray, created: np.ndarray,
            hidden: Optional[np.ndarray] = None) -> None:
        n = len(rowids)
        if n == 0:
            return
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
        if self.hnsw is not None:
            self.hnsw.add(np.ascontiguousarray(vectors, dtype=np.float32))
        elif self.alive_count() >= self.settings.exact_below:
            self.build_hnsw()

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
        keep = ~self._dead[: self.size]
        vectors, rowids = self._vectors[: self.size][keep], self._rowids[: self.size][keep]
        created, hidden = self._created[: self.size][keep], self._hidden[: self.size][keep]
        had_graph = self.hnsw is not None
        self.__init__(self.settings)
        if had_graph and len(rowids) >= self.settings.exact_below:
            self._load_arrays(rowids, vectors, created, hidden)
            self.build_hnsw()
        else:
            self.add(rowids, vectors, created, hidden)

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
    def build_hnsw(self) -> None:
        s = self.settings
        index = faiss.IndexHNSWFlat(s.dim, s.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = s.hnsw_ef_construction
        index.hnsw.efSearch = s.hnsw_ef_search
        step = 10000
        with tqdm(total=self.size, desc="building the vector index", unit="vec", leave=False,
                  disable=self.size < 50000) as bar:
            for start in range(0, self.size, step):
                chunk = self._vectors[start:min(self.size, start + step)]
                index.add(np.ascontiguousarray(chunk))
                bar.update(len(chunk))
        self.hnsw = index

    def save_graph(self, path: Path) -> None:
        if self.hnsw is None:
            return
        partial = path.with_suffix(".partial")
        faiss.write_index(self.hnsw, str(partial))
        np.save(partial.with_suffix(".rowids.npy"), self._rowids[: self.size])
        partial.with_suffix(".rowids.npy").replace(path.with_suffix(".rowids.npy"))
        partial.replace(path)

    def load_graph(self, path: Path) -> bool:
        """Adopt a saved graph only if it indexes exactly this partition's rows, in this order."""
        try:
            saved_rowids = np.load(path.with_suffix(".rowids.npy"))
            if not np.array_equal(saved_rowids, self._rowids[: self.size]):
                return False
            index = faiss.read_index(str(path))
        except (OSError, ValueError, RuntimeError):
            return False
        if index.ntotal != self.size or index.d != self.settings.dim:
            return False
        index.hnsw.efSearch = self.settings.hnsw_ef_search
        self.hnsw = index
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
        bits = np.packbits(allowed, bitorder="little")
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(self.settings.hnsw_ef_search, k)
        selector = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))  # held here: SWIG does not keep it alive
        params.sel = selector
        sims, labels = self.hnsw.search(query.reshape(1, -1), min(k, n_allowed), params=params)
        del selector, bits
        labels, sims = labels[0], sims[0]
        valid = labels >= 0
        labels, sims = labels[valid], sims[valid]
        return self._rowids[labels], sims.astype(np.float32)


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
