"""The store's vectors in RAM: one partition per (owner, zone), kept in step with SQLite.

Partitioning by owner (an agent, or the shared memories) and zone is the metadata pre-filter: a
query filtered on agent and zone searches only the partitions it may see. Beside the partitions this
keeps what every retrieval needs without reading SQLite: which partition each row is in, the rerank
inputs, and the rowids of remembered failures. The partitions are rebuilt from SQLite at open, and
saved HNSW graphs are reused only when every row they index is still in SQLite (rows they lack are
the partition's tail), so a missing, stale or corrupt index file costs a rebuild, never a wrong
answer. A background thread (``indexer``) moves new rows into the graphs.
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from brainmem_ros.core.store.graph import IndexSettings
from brainmem_ros.core.store.indexer import GraphIndexer
from brainmem_ros.core.store.partition import Partition
from brainmem_ros.core.store.rerank_inputs import RerankInputs
from brainmem_ros.core.store.rows import RowVectors
from brainmem_ros.core.trace import Entry, Zone

__all__ = ["VectorPartitions", "SHARED_OWNER", "owner"]

log = logging.getLogger("brainmem_ros.store")
SHARED_OWNER = "\x00shared"


def owner(agent_id: str, shared: bool) -> str:
    """Return the owner a memory is filed under: its agent, or every agent when shared."""
    return SHARED_OWNER if shared else agent_id


class VectorPartitions:
    """Every partition of one store, and the in-RAM maps that go with them.

    Locking: the maps are changed under the store's lock (``lock``); each partition also locks
    itself, so a graph can be searched or saved while the store writes.
    """

    def __init__(self, store_path: Path, settings: IndexSettings, lock: threading.RLock,
                 save_every: int):
        self.settings = settings
        self.lock = lock
        self.save_every = save_every
        self.folder = Path(f"{store_path}.index")
        self.partitions: dict[tuple[str, str], Partition] = {}
        self.where: dict[int, tuple[str, str]] = {}
        # The one tuple object of each partition key: ``where`` holds a reference per row to a few
        # keys, and a freshly made key put in it would have the collector walk all of it again
        # (see rerank_inputs.py).
        self.keys: dict[tuple[str, str], tuple[str, str]] = {}
        self.scoring = RerankInputs()
        self.warning_rowids: set[int] = set()
        self.changes_since_save = 0
        self.save_due = False
        self.rebuilt: list[str] = []
        self.indexer = GraphIndexer(self)

    def reset(self) -> None:
        """Forget every partition (before a full read, after a snapshot failed half-way)."""
        with self.lock:
            self.partitions.clear()
            self.where.clear()
            self.scoring = RerankInputs()
            self.warning_rowids = set()
            self.rebuilt = []

    def graph_path(self, key: tuple[str, str]) -> Path:
        name = "shared" if key[0] == SHARED_OWNER else \
            "".join(c if c.isalnum() or c in "-_" else "_" for c in key[0])
        digest = uuid.uuid5(uuid.NAMESPACE_URL, key[0]).hex[:8]
        return self.folder / f"{name}-{digest}-{key[1]}.faiss"

    # -- loading and saving ----------------------------------------------------------------------
    def load(self, chunks: Iterable[Sequence[tuple]], decode: Callable[[list[bytes]], np.ndarray],
             warning_rowids: Iterable[int]) -> None:
        """Fill every partition from SQLite rows and reuse saved graphs where they still fit.

        ``chunks``: lists of (rowid, agent_id, shared, zone, created, superseded, embedding blob,
        importance, last_access, confidence) in rowid order; ``decode`` turns blobs into vectors.
        A chunk at a time, so that a large store is never held twice over in RAM while it opens.
        """
        with self.lock:
            self.scoring = RerankInputs()
            self.warning_rowids = set(warning_rowids)
            for rows in chunks:
                self.scoring.add([r[0] for r in rows],
                                 np.array([(r[7], r[8], r[4], 1.0 if r[9] is None else r[9])
                                           for r in rows], dtype=np.float64).reshape(len(rows), 4))
                grouped: dict[tuple[str, str], list] = defaultdict(list)
                for row in rows:
                    grouped[(owner(row[1], bool(row[2])), row[3])].append(row)
                for key, group in grouped.items():
                    key = self.keys.setdefault(key, key)
                    part = self.partitions.get(key) or self.partitions.setdefault(
                        key, Partition(self.settings))
                    rowids = np.fromiter((r[0] for r in group), dtype=np.int64, count=len(group))
                    part.add(rowids, decode([r[6] for r in group]),
                             np.fromiter((r[4] for r in group), dtype=np.float64, count=len(group)),
                             np.fromiter((bool(r[5]) for r in group), dtype=bool, count=len(group)))
                    self.where.update(dict.fromkeys(rowids.tolist(), key))
            self._adopt_graphs()

    def _adopt_graphs(self) -> None:
        for key, part in self.partitions.items():
            if part.size >= self.settings.exact_below and not part.load_graph(
                    self.graph_path(key)):
                log.info("building the vector index of %s/%s (%d entries)", key[0], key[1],
                         part.size)
                part.build_hnsw()
                self.rebuilt.append(f"{key[0]}/{key[1]}")
        self.indexer.wake()

    def snapshot(self) -> tuple[dict[str, np.ndarray], list]:
        """Arrays of every partition's live rows, the rerank inputs and the failures; the keys."""
        with self.lock:
            arrays: dict[str, np.ndarray] = {}
            keys = []
            for i, (key, part) in enumerate(self.partitions.items()):
                rowids, created, hidden, vectors = part.live_rows()
                arrays.update({f"p{i}_rowids": rowids, f"p{i}_created": created,
                               f"p{i}_hidden": hidden})
                held = vectors.arrays(len(rowids))
                arrays.update({f"p{i}_{name}": a for name, a in held.items()})
                keys.append(list(key))
            arrays["scoring_rowids"], arrays["scoring_values"] = self.scoring.arrays()
            arrays["warnings"] = np.array(sorted(self.warning_rowids), dtype=np.int64)
            return arrays, keys

    def restore(self, arrays: dict[str, np.ndarray], keys: list) -> None:
        """Fill every partition from a ``snapshot`` (its graphs as at an open from SQLite)."""
        with self.lock:
            self.scoring = RerankInputs()
            self.scoring.add(arrays["scoring_rowids"].tolist(), arrays["scoring_values"])
            self.warning_rowids = set(arrays["warnings"].tolist())
            for i, (who, zone) in enumerate(keys):
                key = self.keys.setdefault((who, zone), (who, zone))
                part = Partition(self.settings)
                rowids = arrays[f"p{i}_rowids"]
                part._load_arrays(rowids, RowVectors.from_arrays(
                    self.settings.dim, arrays[f"p{i}_codes"], arrays.get(f"p{i}_scales")),
                    arrays[f"p{i}_created"], arrays[f"p{i}_hidden"])
                self.partitions[key] = part
                self.where.update(dict.fromkeys(rowids.tolist(), key))
            self._adopt_graphs()

    def save(self) -> None:
        """Save the approximate-search graphs.

        They are a cache of SQLite: a failure to save (a full disk) is logged, and the next start
        rebuilds them. Each partition locks itself while it is saved; the store's lock is not held,
        so writes go on meanwhile.
        """
        self.save_due = False
        self.changes_since_save = 0
        with self.lock:
            partitions = list(self.partitions.items())
        for key, part in partitions:
            if part.hnsw is not None:
                path = self.graph_path(key)
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    part.save_graph(path)
                except (OSError, RuntimeError) as exc:
                    log.warning(
                        "could not save the vector index %s (%s); it will be rebuilt at start",
                        path, exc)

    def _note_changes(self, n: int) -> None:
        """Have the background indexer save the graphs every ``save_every`` changes.

        Never more often than every quarter of the store's size: a save rewrites whole graphs, and
        a missed save only costs a rebuild. The indexer saves, not the writer, whose core is the
        busier one during ingest.
        """
        self.changes_since_save += n
        due = max(self.save_every, len(self.where) // 4)
        if self.save_every and self.changes_since_save >= due:
            self.save_due = any(part.hnsw is not None for part in list(self.partitions.values()))

    # -- changes ----------------------------------------------------------------------------------
    def add(self, rows: list[tuple[int, Entry]], vectors: np.ndarray) -> None:
        """Rows just committed: ``vectors[i]`` is the (stored) embedding of ``rows[i]``."""
        grouped: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, (_, entry) in enumerate(rows):
            grouped[(owner(entry.agent_id, entry.shared), entry.zone.value)].append(i)
        for key, members in grouped.items():
            group = [rows[i] for i in members]
            rowids = [r for r, _ in group]
            key = self.keys.setdefault(key, key)
            part = self.partitions.get(key) or self.partitions.setdefault(
                key, Partition(self.settings))
            part.add(np.array(rowids, dtype=np.int64), vectors[members],
                     np.array([e.created for _, e in group], dtype=np.float64),
                     np.array([e.superseded for _, e in group], dtype=bool))
            self.where.update(dict.fromkeys(rowids, key))
            with self.lock:
                self.scoring.add(
                    rowids,
                    np.array([(float(e.importance), e.last_access, e.created, float(e.confidence))
                              for _, e in group], dtype=np.float64))
            self.warning_rowids.update(r for r, e in group if e.warning)
        self._note_changes(len(rows))

    def remove(self, rowids: Iterable[int]) -> None:
        touched = set()
        with self.lock:  # once for the whole batch: a pruning pass removes thousands of rows
            for rowid in rowids:
                self.warning_rowids.discard(rowid)
                self.scoring.remove(rowid)
                key = self.where.pop(rowid, None)
                if key and self.partitions[key].remove(rowid):
                    touched.add(key)
        for key in touched:
            if self.partitions[key].needs_compaction():
                self.partitions[key].compact()
        if touched:
            self.indexer.wake()  # deleted rows count towards a rebuild of the graph they were in

    def set_hidden(self, rowid: int, hidden: bool) -> None:
        key = self.where.get(rowid)
        if key:
            self.partitions[key].set_hidden(rowid, hidden)

    def set_vector(self, rowid: int, vector: np.ndarray) -> None:
        key = self.where.get(rowid)
        part = self.partitions.get(key) if key else None
        if part is not None:
            part.set_vector(rowid, vector)

    def touch(self, rowid: int, importance: float, last_access: float,
              confidence: Optional[float] = None) -> None:
        """Set new rerank inputs of one row (an access, a strengthening, a new importance)."""
        with self.lock:
            self.scoring.touch(rowid, importance, last_access, confidence)

    # -- reads -------------------------------------------------------------------------------------
    def visible(self, agent_id: str, zones: Sequence[Zone]) -> list[Partition]:
        zone_values = {z.value for z in zones}
        return [
            p for (who, zone), p in self.partitions.items()
            if zone in zone_values and who in (agent_id, SHARED_OWNER)
        ]

    def search(self, query: np.ndarray, agent_id: str, zones: Sequence[Zone], k: int,
               since: float = 0.0, until: float = 0.0, include_superseded: bool = False,
               exact: bool = False) -> list[tuple[int, float]]:
        """Return the ``k`` nearest (rowid, cosine) among the partitions the agent may see."""
        with self.lock:
            results: list[tuple[int, float]] = []
            for part in self.visible(agent_id, zones):
                rowids, sims = part.search(query, k, since, until, include_superseded, exact)
                results.extend(zip(rowids.tolist(), sims.tolist()))
        results.sort(key=lambda item: -item[1])
        return results[:k]

    def scoring_inputs(self, rowids: Sequence[int]) -> tuple[list[int], np.ndarray, np.ndarray]:
        """Return (live rowids, vectors, [importance, last_access, created, confidence] rows)."""
        with self.lock:
            live, values = self.scoring.of(rowids)
            if not live:
                return [], np.zeros((0, self.settings.dim), dtype=np.float32), np.zeros((0, 4))
            vectors = np.stack([self.partitions[self.where[r]].vector(r) for r in live])
            return live, vectors, values

    def vector_of(self, rowid: int) -> Optional[np.ndarray]:
        key = self.where.get(rowid)
        return self.partitions[key].vector(rowid) if key else None

    def owner_of(self, rowid: int) -> str:
        return self.where.get(rowid, ("", ""))[0]

    def agents(self) -> set[str]:
        """Return the agents with memories of their own in this store."""
        return {who for who, _ in list(self.partitions) if who != SHARED_OWNER}

    # -- the background indexer ------------------------------------------------------------------
    def backlog(self) -> int:
        """Rows committed but not yet in a graph (searched exactly meanwhile)."""
        return sum(part.tail for part in list(self.partitions.values()))

    def work(self) -> int:
        """Count the work the background indexer still owes.

        Work the background indexer still owes: rows for tails and due or running graph rebuilds,
        and one for a due save.
        """
        return sum(part.backlog for part in list(self.partitions.values())) + int(self.save_due)

    def wait_indexed(self, timeout: Optional[float] = None) -> bool:
        """Block until every committed row is in its graphs and no rebuild is due.

        Block until every committed row is in its partition's graphs and no graph rebuild is due
        (True), or ``timeout`` passes.
        """
        return self.indexer.wait_idle(timeout)

    def close(self) -> None:
        """Let the graphs catch up, save them and stop the indexer (the caller holds no lock)."""
        self.indexer.wait_idle(timeout=60.0)
