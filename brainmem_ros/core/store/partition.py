"""Vector recall over one partition of long-term memory, exact while small and HNSW when large.

A partition is one agent's, or the shared, entries of one zone.

Partitioning by (owner, zone) is the metadata pre-filter: a query filtered on agent and zone
searches only the partitions it may see, so the filter costs nothing and never starves an
approximate index of candidates. Within a partition, superseded rows are kept so history queries can
still reach them, but out of the way of default queries: a large partition has a current graph and a
history graph (see "graphs" below). Deleted rows are tombstoned until the partition is compacted.

Rows enter a graph behind the write, not in it: new rows join the partition's arrays at once (the
"tail", searched exactly) and ``index_tail`` moves them into a graph in small chunks, on the
background indexer's thread (``indexer.py`` says why).
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Optional

import faiss
import numpy as np
from tqdm import tqdm

from brainmem_ros.core.store.graph import (
    Graph, IndexSettings, Rebuild, limit_blas_threads, top_indices)
from brainmem_ros.core.store.graph_files import (
    SavedGraph, history_path, positions_of, read_graph, remove_graph, write_graph)
from brainmem_ros.core.store.rows import RowVectors
from brainmem_ros.core.store.twins import group_identical

__all__ = ["Partition"]

# where a row's vector is: no graph yet, the current graph, the history graph
_TAIL, _CURRENT, _HISTORY = 0, 1, 2
_BUILD_STEP = 10000  # rows per FAISS call in a full build: the progress bar's step


class Partition:
    """Vectors, rowids, creation times and flags of one partition, with its graphs once large."""

    def __init__(self, settings: IndexSettings):
        self.settings = settings
        # FAISS's HNSW must not be searched while it grows; the indexer copies rows while ingest
        # appends them. Lock order: graph, then rows.
        self._graph_lock = threading.Lock()
        self._rows_lock = threading.Lock()
        self._epoch = 0
        self._reset()

    def _reset(self) -> None:
        self._vectors = RowVectors(self.settings.dim)  # float32 until a graph (_fit_precision)
        self._rowids = np.zeros(0, dtype=np.int64)
        self._created = np.zeros(0, dtype=np.float64)
        self._hidden = np.zeros(0, dtype=bool)  # superseded: skipped unless asked for
        self._dead = np.zeros(0, dtype=bool)  # deleted or archived: never returned
        self._graph_of = np.zeros(0, dtype=np.int8)
        self._label = np.zeros(0, dtype=np.int64)
        self.size = 0
        self.position: dict[int, int] = {}
        self._current: Optional[Graph] = None
        self._history: Optional[Graph] = None
        self._reopened: set[int] = set()  # rows in the history graph that are current again
        self._low = 0  # every row below this position is in a graph, or deleted
        self._in_graphs = 0
        self._dead_outside = 0  # deleted rows that never reached a graph
        self._rebuild: Optional[Rebuild] = None
        self._epoch += 1  # a rebuild begun before a reset must not be swapped in after it

    # -- content -----------------------------------------------------------------------------
    def add(self, rowids: np.ndarray, vectors: np.ndarray, created: np.ndarray,
            hidden: Optional[np.ndarray] = None) -> None:
        n = len(rowids)
        if n == 0:
            return
        with self._rows_lock:
            self._reserve(self.size + n)
            sl = slice(self.size, self.size + n)
            self._vectors.put(sl, vectors)
            self._rowids[sl] = rowids
            self._created[sl] = created
            self._hidden[sl] = False if hidden is None else hidden
            self._dead[sl] = False
            self._graph_of[sl] = _TAIL
            self.position.update(zip(rowids.tolist(), range(self.size, self.size + n)))
            self.size += n
        if self._current is None and self.alive_count() >= self.settings.exact_below:
            with self._graph_lock, self._rows_lock:
                # filled from the tail by index_tail
                self._current = Graph(self.settings, rows=self.alive_count())
                self._fit_precision()
                self._recount()

    @property
    def hnsw(self) -> Optional[faiss.IndexHNSW]:
        """The current graph's FAISS index (None while the partition is searched exactly)."""
        return self._current and self._current.index

    indexed = property(lambda self: self._in_graphs)

    @property
    def tail(self) -> int:
        """Rows waiting to enter a graph (0 for an exact partition)."""
        return self.size - self._in_graphs - self._dead_outside if self._current is not None else 0

    @property
    def backlog(self) -> int:
        """Background work owed: the tail and what a due or running rebuild has still to insert."""
        rebuild = self._rebuild
        if rebuild is not None:
            return self.tail + len(rebuild.positions) - rebuild.done
        return self.tail + (self._current.count if self.regraph_due() else 0)

    def _reserve(self, n: int) -> None:
        if n <= len(self._rowids):
            return
        cap = max(n, 2 * len(self._rowids), 64)
        self._vectors = self._vectors.grown(cap, self.size)
        for name in ("_rowids", "_created", "_hidden", "_dead", "_graph_of", "_label"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[:self.size] = old[:self.size]
            setattr(self, name, new)

    def set_vector(self, rowid: int, vector: np.ndarray) -> None:
        """Set a row's new embedding, for exact search and scoring.

        A graph that holds the row keeps the vector it was inserted with until it is next rebuilt,
        as its saved copy does across a restart, so the store answers the same before and after one.
        """
        with self._rows_lock:
            pos = self.position.get(rowid)
            if pos is not None:
                self._vectors.put(slice(pos, pos + 1), vector)

    def set_hidden(self, rowid: int, hidden: bool) -> None:
        with self._rows_lock:
            pos = self.position.get(rowid)
            if pos is None:
                return
            self._hidden[pos] = hidden
            where = self._graph_of[pos]
            if where != _TAIL:
                self._reflag(where, pos)
            if where == _HISTORY:
                (self._reopened.discard if hidden else self._reopened.add)(pos)

    def remove(self, rowid: int) -> bool:
        with self._rows_lock:
            pos = self.position.pop(rowid, None)
            if pos is None:
                return False
            self._dead[pos] = True
            where = self._graph_of[pos]
            if where == _TAIL:
                self._dead_outside += 1
            else:
                self._reflag(where, pos)
                self._reopened.discard(pos)
            return True

    def _reflag(self, where: int, pos: int) -> None:
        """Set the flags of the label of the row at ``pos`` (changed) from all of its rows."""
        graph = self._current if where == _CURRENT else self._history
        graph.reflag(self._label[pos], self._dead, self._hidden)

    def alive_count(self) -> int:
        return len(self.position)

    def needs_compaction(self) -> bool:
        return self.size > 1024 and self.alive_count() < 0.7 * self.size

    def compact(self) -> None:
        """Drop tombstoned rows (and rebuild the graphs, which cannot delete in place)."""
        with self._graph_lock, self._rows_lock:
            keep = ~self._dead[:self.size]
            vectors = self._vectors.subset(np.flatnonzero(keep))
            rowids = self._rowids[:self.size][keep]
            created, hidden = self._created[:self.size][keep], self._hidden[:self.size][keep]
            had_graph = self._current is not None
            self._reset()
            self._load_arrays(rowids, vectors, created, hidden)
            if had_graph and len(rowids) >= self.settings.exact_below:
                self._build_locked()
            self._fit_precision()

    def _load_arrays(self, rowids, vectors, created, hidden) -> None:
        """Hold these rows (``vectors``: a float32 matrix, or ``RowVectors`` of exactly them)."""
        n = len(rowids)
        self._reserve(n)
        if isinstance(vectors, RowVectors):
            self._vectors = vectors.grown(len(self._rowids), n)
        else:
            self._vectors.put(slice(0, n), vectors)
        self._rowids[:n] = rowids
        self._created[:n], self._hidden[:n] = created, hidden
        self._dead[:n] = False
        self._graph_of[:n] = _TAIL
        self.position = {r: i for i, r in enumerate(rowids.tolist())}
        self.size = n

    def live_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, RowVectors]:
        """Rowids, creation times, superseded flags and vectors of the rows not deleted."""
        with self._rows_lock:
            keep = np.flatnonzero(~self._dead[:self.size])
            return (self._rowids[keep], self._created[keep], self._hidden[keep],
                    self._vectors.subset(keep))

    def vector(self, rowid: int) -> Optional[np.ndarray]:
        pos = self.position.get(rowid)
        return None if pos is None else self._vectors.take(slice(pos, pos + 1))[0]

    # -- graphs -----------------------------------------------------------------------------
    # Superseded rows would crowd a single graph: at 1M memories the stale copies of a fact sit
    # right next to it, and a filtered walk of a graph where 37% of the rows are hidden found 0.87
    # of the true top 10 (0.99 unfiltered). So current rows live in the current graph, and rows
    # that were already superseded when they were inserted, or when the current graph was last
    # rebuilt, live in the history graph, which only history queries walk. Rows superseded since
    # then stay in the current graph, flagged, until they pass ``regraph_share`` of it: then the
    # background indexer builds a fresh current graph, a chunk at a time, and swaps it in.
    def index_tail(self, max_rows: int) -> int:
        """Move up to ``max_rows`` rows of the tail into the graphs; returns how many moved."""
        with self._graph_lock:
            if self._current is None:
                return 0
            with self._rows_lock:
                n, low = self.size, self._low
                todo = np.flatnonzero((self._graph_of[low:n] == _TAIL) & ~self._dead[low:n]) + low
                self._low = int(todo[max_rows]) if len(todo) > max_rows else n
                todo = todo[:max_rows]
                vectors = self._vectors.take(todo)  # a copy: _reserve may swap arrays
                hidden = self._hidden[todo]
            for kind, mask in ((_CURRENT, ~hidden), (_HISTORY, hidden)):
                if not mask.any():
                    continue
                if kind == _HISTORY and self._history is None:
                    self._history = Graph(self.settings, history=True)
                graph = self._current if kind == _CURRENT else self._history
                graph.prepare(lambda: self._vectors.sample(  # a quantised graph's value ranges
                    np.flatnonzero(~self._dead[:self.size]), self.settings.training_rows))
                rows, chunk = todo[mask], vectors[mask]
                new, labels = graph.place(chunk, self._vectors.take)
                graph.index.add(np.ascontiguousarray(chunk[new]))
                with self._rows_lock:
                    self._adopt_labels(kind, graph, rows[new])
                    self._adopt_labels(kind, graph, rows[~new], labels[~new])
            return len(todo)

    def _adopt_labels(self, kind: int, graph: Graph, positions: np.ndarray,
                      twin_of: Optional[np.ndarray] = None) -> None:
        """Record that ``graph``'s next labels are the rows at ``positions`` (-1: none).

        Or, given ``twin_of``, that those rows share the labels ``twin_of`` (their vectors are
        identical). With the rows' flags as they are now (a row may have been superseded or deleted
        meanwhile).
        """
        valid = positions >= 0
        rows = positions[valid]
        live = valid.copy()
        live[valid] = ~self._dead[rows]
        current = live.copy()
        current[valid] &= ~self._hidden[rows]
        if twin_of is None:
            labels = np.arange(graph.count, graph.count + len(positions))[valid]
            graph.append_labels(positions, live, current)
        else:
            labels = twin_of[valid]
            graph.add_twins(labels, rows, live[valid], current[valid])
        self._dead_outside -= int(
            np.count_nonzero(self._dead[rows] & (self._graph_of[rows] == _TAIL)))
        self._in_graphs += int(np.count_nonzero(self._graph_of[rows] == _TAIL))
        self._graph_of[rows] = kind
        self._label[rows] = labels
        if kind == _HISTORY:
            self._reopened.update(positions[current].tolist())

    def _install(self, kind: int, graph: Graph, positions: np.ndarray, twins: np.ndarray,
                 twin_of: np.ndarray) -> None:
        """Make ``graph`` (``positions``' labels, ``twins`` sharing ``twin_of``) ``kind``'s."""
        self._adopt_labels(kind, graph, positions)
        self._adopt_labels(kind, graph, twins, twin_of)
        setattr(self, "_current" if kind == _CURRENT else "_history", graph)
        self._fit_precision()

    def _fit_precision(self) -> None:
        """Hold the rows as ``ram_precision`` once a graph searches them, float32 while exact."""
        wanted = self.settings.ram_precision if self._current is not None else "float32"
        self._vectors = self._vectors.as_precision(wanted, self.size)

    def _recount(self) -> None:
        n = self.size
        where, dead = self._graph_of[:n], self._dead[:n]
        self._in_graphs = int(np.count_nonzero(where != _TAIL))
        self._dead_outside = int(np.count_nonzero((where == _TAIL) & dead))
        outside = np.flatnonzero((where == _TAIL) & ~dead)
        self._low = int(outside[0]) if len(outside) else n

    def regraph_due(self) -> bool:
        """Tell whether the current graph is crowded by superseded rows or outgrew its degree."""
        graph = self._current
        return (graph is not None and self._rebuild is None
                and graph.count >= self.settings.exact_below
                and (graph.blocked > self.settings.regraph_share * graph.count
                     or graph.m < self.settings.m_for(graph.count - graph.blocked)))

    def index_step(self, max_rows: int) -> int:
        """Do one unit of the background indexer's work; return the rows inserted.

        A unit is a chunk of the tail and a chunk of a due rebuild, so neither waits for the other.
        """
        work = self.index_tail(max_rows)
        if self._rebuild is None and self.regraph_due():
            with self._rows_lock:
                n, epoch, vectors = self.size, self._epoch, self._vectors
                keep = np.flatnonzero((self._graph_of[:n] != _HISTORY) & ~self._hidden[:n]
                                      & ~self._dead[:n])
            firsts, twins, twin_of, keys = group_identical(vectors.take, keep)
            self._rebuild = Rebuild(epoch, vectors, firsts, Graph(self.settings, rows=len(firsts)),
                                    twins, twin_of, keys)
        rebuild = self._rebuild
        if rebuild is not None:
            chunk = rebuild.positions[rebuild.done:rebuild.done + max_rows]
            rebuild.graph.prepare(
                lambda: rebuild.vectors.sample(rebuild.positions, self.settings.training_rows))
            rebuild.graph.index.add(rebuild.vectors.take(chunk))  # private: no lock
            rebuild.done += len(chunk)
            work += len(chunk)
            if rebuild.done == len(rebuild.positions):
                self._swap_in(rebuild)
        return work

    def _swap_in(self, rebuild: Rebuild) -> None:
        with self._graph_lock, self._rows_lock:
            if self._rebuild is not rebuild or rebuild.epoch != self._epoch:
                return  # compacted meanwhile: that rebuilt everything already
            old = self._current
            leaving = np.concatenate([old.pos[:old.count], old.twin_pos[:old.twin_count]])
            # The rows it held that the new one lacks go to the history graph.
            self._graph_of[leaving[leaving >= 0]] = _TAIL
            # A row superseded and moved into the history graph during the build stays there only.
            positions = np.where(self._graph_of[rebuild.positions] == _HISTORY, -1,
                                 rebuild.positions)
            stay = self._graph_of[rebuild.twins] != _HISTORY
            self._recount()
            rebuild.graph.remember(rebuild.keys)
            self._install(_CURRENT, rebuild.graph, positions, rebuild.twins[stay],
                          rebuild.twin_of[stay])
            self._rebuild = None
            self._recount()

    def build_hnsw(self) -> None:
        """Build the graphs over every row now (at start, when no saved graph fits)."""
        with self._graph_lock, self._rows_lock:
            self._build_locked()

    def _build_locked(self) -> None:
        n = self.size
        self._graph_of[:n] = _TAIL
        self._current, self._history, self._reopened, self._rebuild = Graph(
            self.settings), None, set(), None
        self._recount()
        live = ~self._dead[:n]
        parts = ((_CURRENT, np.flatnonzero(live & ~self._hidden[:n])),
                 (_HISTORY, np.flatnonzero(live & self._hidden[:n])))
        with tqdm(total=int(np.count_nonzero(live)), desc="building the vector index", unit="vec",
                  leave=False, disable=n < 50000) as bar:
            for kind, rows in parts:
                if kind == _HISTORY and not len(rows):
                    continue
                positions, twins, twin_of, keys = group_identical(self._vectors.take, rows)
                graph = Graph(self.settings, history=kind == _HISTORY, rows=len(positions))
                graph.remember(keys)
                graph.prepare(lambda: self._vectors.sample(positions, self.settings.training_rows))
                for start in range(0, len(positions), _BUILD_STEP):
                    chunk = positions[start:start + _BUILD_STEP]
                    graph.index.add(self._vectors.take(chunk))
                    bar.update(len(chunk))
                bar.update(len(twins))
                self._install(kind, graph, positions, twins, twin_of)
        self._recount()

    def save_graph(self, path: Path) -> None:
        """Save the graphs with the rowid behind each label (-1 for deleted rows) and the twins."""
        with self._graph_lock:
            for graph, target in ((self._current, path), (self._history, history_path(path))):
                if graph is None:
                    remove_graph(target)
                    continue
                with self._rows_lock:
                    pos = graph.pos[:graph.count]
                    safe = np.maximum(pos, 0)
                    rowids = np.where((pos >= 0) & ~self._dead[safe], self._rowids[safe], -1)
                    twins = graph.twin_pos[:graph.twin_count]
                    alive = ~self._dead[twins]
                    saved = SavedGraph(graph.index, rowids,
                                       graph.twin_labels[:graph.twin_count][alive],
                                       self._rowids[twins[alive]])
                write_graph(target, saved)

    def load_graph(self, path: Path) -> bool:
        """Adopt saved graphs if every row they index still exists.

        Rows added after the save (a crash before the next one) become the tail instead of forcing a
        rebuild. A row deleted behind the graphs' back makes them stale: False, and the caller
        rebuilds.
        """
        loaded = []
        for kind, target in ((_CURRENT, path), (_HISTORY, history_path(path))):
            try:
                saved = read_graph(target, self.settings.dim, self.settings.compact)
            except FileNotFoundError:
                if kind == _CURRENT:
                    return False
                continue
            if saved is None:
                return False
            held = (self._rowids[:self.size], self._dead[:self.size])
            positions, twins = positions_of(*held, saved.rowids), positions_of(*held,
                                                                               saved.twin_rowids)
            if np.count_nonzero((positions < 0) & (saved.rowids >= 0)) or np.any(twins < 0):
                return False
            loaded.append((kind, saved.index, positions, twins, saved.twin_labels))
        with self._graph_lock, self._rows_lock:
            self._graph_of[:self.size] = _TAIL
            self._recount()
            for kind, index, positions, twins, twin_of in loaded:
                # Saved one after the other, the two files may disagree after a crash: a row claimed
                # by the current graph is not taken again by the history graph.
                valid = positions >= 0
                taken = valid.copy()
                taken[valid] = self._graph_of[positions[valid]] != _TAIL
                positions = np.where(taken, -1, positions)
                free = self._graph_of[twins] == _TAIL
                self._install(kind, Graph(self.settings, index), positions, twins[free],
                              twin_of[free])
            self._recount()
        return True

    # -- search -----------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int, since: float = 0.0, until: float = 0.0,
               include_hidden: bool = False, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` (rowids, cosine similarities) among rows passing the filters."""
        n = self.size
        if n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        limit_blas_threads()
        allowed = ~self._dead[:n] if include_hidden else ~(self._dead[:n] | self._hidden[:n])
        timed = bool(since or until)
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
            sims = self._vectors.dot(idx, query)
            top = top_indices(sims, k)
            return self._rowids[idx[top]], sims[top]
        if exact or self._current is None:
            sims = self._vectors.dot(slice(0, n), query)
            sims[~allowed] = -np.inf
            top = top_indices(sims, min(k, n_allowed))
            return self._rowids[top], sims[top]
        with self._graph_lock:
            graphs = [self._current, *([self._history] if include_hidden and self._history else [])]
            found_pos, found_sims = [], []
            walked = max(1, sum(graph.count for graph in graphs))  # one candidate list for all
            wanted = k * self.settings.rescore_factor if self.settings.compact else k
            # rows added since ``allowed`` was taken are left out of a timed query
            padded = np.append(allowed, False) if timed else None
            for graph in graphs:
                positions, sims = graph.search(
                    query, wanted, graph.labels_allowed(padded) if timed else None,
                    graph.count / walked, include_hidden)
                # a label is allowed when any of its rows is: its other rows are dropped here
                keep = (positions >= 0) & (positions < n)
                keep[keep] = allowed[positions[keep]]
                found_pos.append(positions[keep])
                found_sims.append(sims[keep])
            if self.settings.compact:  # candidates ranked again by the rows' own codes
                found_pos = [np.concatenate(found_pos)]
                found_sims = [self._vectors.dot(found_pos[0], query)]
            # Scored exactly: rows in no graph yet, and history rows current again (default queries)
            low = min(self._low, n)
            extra = np.flatnonzero(allowed[low:n] & (self._graph_of[low:n] == _TAIL)) + low
            if not include_hidden and self._reopened:
                reopened = np.array(list(self._reopened), dtype=np.int64)
                reopened = reopened[reopened < n]
                extra = np.concatenate([extra, reopened[allowed[reopened]]])
        if len(extra):
            found_pos.append(extra)
            found_sims.append(self._vectors.dot(extra, query))
        positions, sims = np.concatenate(found_pos), np.concatenate(found_sims)
        if len(positions) > 1:  # several graphs, twins and rescoring each leave them unordered
            top = top_indices(sims, k)
            positions, sims = positions[top], sims[top]
        return self._rowids[positions], sims
