"""The background indexer: new rows enter the HNSW graphs behind the write, not in it.

Inserting into HNSW is the most expensive step of an ingest. FAISS runs it without the interpreter
lock, so on a thread of its own it overlaps the next batch's SQLite work on another core, and a
retrieval never waits behind more than one chunk. Until a row is in a graph it is searched exactly
(the partition's tail), so an entry is recallable the moment its id is returned.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING, Optional

from brainmem_ros.core.store.graph import insert_on_one_thread

if TYPE_CHECKING:
    from brainmem_ros.core.store.partitions import VectorPartitions

__all__ = ["GraphIndexer"]

log = logging.getLogger("brainmem_ros.store")
# Rows per graph insertion: a retrieval waits behind at most one chunk, and smaller chunks cost
# ingest more hand-offs of the interpreter lock.
INDEX_CHUNK = 256


class GraphIndexer:
    """The thread that moves partitions' tails into their graphs and saves them when due.

    It also rebuilds crowded graphs (``Partition.index_step``). Started on the first row that needs
    it, so stores that stay exact (small ones, most tests) run no thread. It holds only a weak
    reference to the partitions: a store dropped without ``close`` does not live on through it.
    """

    def __init__(self, partitions: "VectorPartitions"):
        self._partitions = weakref.ref(partitions)
        self._changed = threading.Condition()
        self._busy = False
        self._stopping = False
        self._thread: Optional[threading.Thread] = None

    def wake(self) -> None:
        vectors = self._partitions()
        if vectors is None or self._stopping or not vectors.work():
            return
        with self._changed:
            self._busy = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="brainmem-graph-indexer",
                                                daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self._busy and self._thread is not None and self._thread.is_alive():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)

    def _run(self) -> None:
        insert_on_one_thread()
        while True:
            vectors = self._partitions()
            if vectors is None:
                return
            failed = False
            try:
                for part in list(vectors.partitions.values()):
                    part.index_step(INDEX_CHUNK)
                if vectors.save_due:
                    vectors.save()
            # a failed insertion must not end the thread; the tail stays searchable
            except Exception:
                log.exception("vector index insertion failed; those rows stay in the exact tail")
                failed = True
            with self._changed:
                if self._stopping:
                    return
                # Checked under the condition's lock, so a wake() between the pass and here is not
                # lost.
                if not failed and vectors.work():
                    continue
                del vectors
                self._busy = False
                self._changed.notify_all()
                while not self._busy and not self._stopping:
                    if not self._changed.wait(timeout=5.0) and self._partitions() is None:
                        return
