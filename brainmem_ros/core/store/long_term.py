"""Long-term memory on disk: SQLite as the source of truth, FAISS partitions kept in step with it.

``LongTermStore`` is the facade the rest of the core uses; each of its parts has a module of its
own: ``database`` (the file, its lock, transactions), ``schema``, ``writes`` (new entries,
strengthening, accesses), ``supersession``, ``archive`` (deletion and archiving), ``journal`` (the
working-memory journal), ``queries`` (the recall routes' reads), ``views`` (what an operator asks),
``partitions`` with ``partition``, ``graph`` and ``indexer`` (the vectors in RAM), ``terms`` (word
rarity for lexical recall) and ``blobs`` (how vectors are stored).
"""
from __future__ import annotations

import logging
import math
import sqlite3
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

from brainmem_ros.core.clock import Clock, wall_clock
from brainmem_ros.core.errors import StoreUnavailable
from brainmem_ros.core.store import views
from brainmem_ros.core.store.archive import Archive
from brainmem_ros.core.store.blobs import VectorCodec
from brainmem_ros.core.store.database import Database
from brainmem_ros.core.store.graph import IndexSettings
from brainmem_ros.core.store.journal import Journal
from brainmem_ros.core.store.outbox import Outbox
from brainmem_ros.core.store.partitions import VectorPartitions, owner
from brainmem_ros.core.store.queries import Reader
from brainmem_ros.core.store.schema import create_schema
from brainmem_ros.core.store.snapshot import discard_snapshot, load_snapshot, save_snapshot
from brainmem_ros.core.store.terms import TermCounts
from brainmem_ros.core.store.writes import AccessLog, Writer
from brainmem_ros.core.trace import Entry, Position, Zone

__all__ = ["LongTermStore"]

log = logging.getLogger("brainmem_ros.store")
_LOAD_CHUNK = 50000  # rows read from SQLite at a time while the store opens


class LongTermStore:
    """The persistent zones (episodic, semantic, procedural, goal) of every agent."""

    def __init__(self, path: str | Path, dim: int = 384, index: IndexSettings | None = None,
                 synchronous: str = "FULL", index_save_every: int = 5000, model_name: str = "",
                 embedding_precision: str = "float16", clock: Clock = wall_clock,
                 fixed_frame: str = "map", shares: Optional[Callable[[Entry], bool]] = None):
        """Open (or create) the store at ``path``; ``clock`` stamps what is written.

        ``shares``: the fleet's policy, which memories go to the outbox (None: no fleet).
        """
        self.path = Path(path).expanduser()
        self.clock = clock
        self.dim = dim
        self._codec = VectorCodec(dim, embedding_precision)
        self.index_settings = index or IndexSettings(dim=dim)
        self.created_new = not self.path.exists()
        self.opened_from = "sqlite"  # or "snapshot": what RAM was filled from (snapshot.py)
        self._db = Database(self.path, synchronous)
        self._vectors = VectorPartitions(self.path, self.index_settings, self._db.lock,
                                         index_save_every)
        self._terms = TermCounts(self._db.lock)
        try:
            self._db.open()
            per_row_fts_trigger = create_schema(self._db, dim, model_name, fixed_frame)
            self._db.counts_generation = True
        except (sqlite3.Error, OSError, StoreUnavailable) as exc:
            self._db.close()  # refused (another model, another dimension): let the file go
            if isinstance(exc, StoreUnavailable):
                raise
            raise StoreUnavailable(f"cannot open the memory store {self.path}: {exc}") from exc
        self._access = AccessLog(self._db, self._vectors, clock)
        self.outbox = Outbox(self._db, shares)
        self._writer = Writer(self._db, self._vectors, self._terms, self._codec,
                              per_row_fts_trigger, clock, self.outbox)
        self._archive = Archive(self._db, self._vectors, self._terms, clock, self.outbox)
        self._journal = Journal(self._db)
        self._reader = Reader(self._db, self._vectors, self._terms, self._codec, self._access)
        self._load()

    def _stamp(self) -> dict:
        """Return what a RAM snapshot must have been saved at to be adopted (``snapshot.py``)."""
        generation = self._db.conn.execute(
            "SELECT value FROM meta WHERE key = 'generation'").fetchone()
        entries, last = self._db.conn.execute("SELECT COUNT(*), MAX(rowid) FROM entries").fetchone()
        return {"generation": int(generation[0]) if generation else -1, "entries": entries,
                "last_rowid": last, "dim": self.dim}

    def _load(self) -> None:
        with self._db.lock:
            saved = load_snapshot(self._vectors.folder, self._stamp())
            if saved is not None:
                arrays, extra = saved
                try:
                    self._vectors.restore(arrays, extra["partitions"])
                    self._terms.restore(extra["terms"])
                    self.opened_from = "snapshot"
                    return
                except (KeyError, ValueError, TypeError) as exc:
                    log.warning("ignoring the store's RAM snapshot (%s); reading SQLite", exc)
                    self._vectors.reset()
            warnings = [
                r[0] for r in self._db.conn.execute("SELECT rowid FROM entries WHERE warning = 1")
            ]
            rows = self._db.conn.execute(
                "SELECT rowid, agent_id, shared, zone, created, superseded, embedding, importance,"
                " last_access, confidence, content, entity_text FROM entries ORDER BY rowid")
            self._vectors.load(self._counted(rows), self._codec.decode, warnings)

    def _counted(self, rows: sqlite3.Cursor) -> Iterator[list[tuple]]:
        """Chunks of the store's rows, their words counted for lexical recall on the way."""
        while chunk := rows.fetchmany(_LOAD_CHUNK):
            self._terms.count([(owner(r[1], bool(r[2])), f"{r[10]} {r[11] or ''}")
                               for r in chunk], +1)
            yield chunk

    @property
    def rebuilt_partitions(self) -> list[str]:
        """Partitions whose graphs were rebuilt from SQLite at open (no saved graph fitted)."""
        return self._vectors.rebuilt

    # -- writes
    # -------------------------------------------------------------------------------------
    def add(
        self, entries: Sequence[Entry], supersede: Sequence[str] = ("location", "state"),
        journal_remove: Sequence[str] = (), within: Optional[Callable] = None
    ) -> list[str]:
        """Store entries atomically; their ids once committed (``writes.Writer.add``)."""
        return self._writer.add(entries, supersede, journal_remove, within)

    def strengthen(self, entry_id: str, importance: float, content: Optional[str] = None,
                   embedding: Optional[np.ndarray] = None, confidence: Optional[float] = None,
                   within: Optional[Callable] = None) -> None:
        self._writer.strengthen(entry_id, importance, content, embedding, confidence, within)

    def set_importance(self, entry_ids: Sequence[str], importance: Sequence[float]) -> int:
        return self._writer.set_importance(entry_ids, importance)

    def record_access(self, rowids: Sequence[int], importance: Sequence[float], now: float) -> None:
        self._access.record(rowids, importance, now)

    def flush(self) -> None:
        self._access.flush()

    def upsert_goal(self, goal) -> None:
        self._writer.upsert_goal(goal)

    def delete(self, agent_id: str, ids: Sequence[str] = (), entities: Sequence[str] = (),
               within: Optional[Callable] = None, missing_ok: bool = False) -> int:
        return self._archive.delete(agent_id, ids, entities, within, missing_ok)

    def known(self, ids: Sequence[str]) -> set[str]:
        """Return which of ``ids`` the store holds."""
        return self._reader.known(ids)

    def archive_rows(self, rowids: Sequence[int], reason: str, hard_delete: bool) -> int:
        return self._archive.archive_rows(rowids, reason, hard_delete)

    def journal_write(self, add: Sequence[tuple[str, str, float, str]] = (),
                      remove: Sequence[str] = ()) -> None:
        self._journal.write(add, remove)

    def journal(self) -> list[tuple[str, str, str]]:
        return self._journal.read()

    def working_counts(self) -> dict[str, int]:
        return self._journal.counts()

    # -- reads
    # ---------------------------------------------------------------------------------------
    def vector_search(self, query: np.ndarray, agent_id: str, zones: Sequence[Zone], k: int,
                      since: float = 0.0, until: float = 0.0, include_superseded: bool = False,
                      exact: bool = False) -> list[tuple[int, float]]:
        return self._vectors.search(query, agent_id, zones, k, since, until, include_superseded,
                                    exact)

    def lexical_search(self, terms: Sequence[str], agent_id: str, zones: Sequence[Zone], k: int,
                       include_superseded: bool = False, max_df: float = 1.0, since: float = 0.0,
                       until: float = 0.0) -> list[tuple[int, float]]:
        return self._reader.lexical_search(terms, agent_id, zones, k, include_superseded, max_df,
                                           since, until)

    def entity_entries(self, entities: Sequence[str], agent_id: str, zones: Sequence[Zone],
                       limit: int, include_superseded: bool = False, per_entity: int = 0,
                       since: float = 0.0, until: float = 0.0) -> list[tuple[int, str]]:
        return self._reader.entity_entries(entities, agent_id, zones, limit, include_superseded,
                                           per_entity, since, until)

    def neighbours(self, entities: Sequence[str], agent_id: str, exclude: Sequence[str] = (),
                   fanout: int = 1000) -> list[str]:
        return self._reader.neighbours(entities, agent_id, exclude, fanout)

    def frames(self, agent_id: str) -> set[str]:
        return self._reader.frames(agent_id)

    def spatial_search(self, agent_id: str, zones: Sequence[Zone], position: Position, frame: str,
                       radius: float, limit: int, include_superseded: bool = False,
                       since: float = 0.0, until: float = 0.0) -> list[tuple[int, float]]:
        return self._reader.spatial_search(agent_id, zones, position, frame, radius, limit,
                                           include_superseded, since, until)

    def current_facts(self, agent_id: str,
                      subjects: Sequence[str]) -> dict[tuple[str, str], tuple[str, str]]:
        return self._reader.current_facts(agent_id, subjects)

    def positioned(self, limit: int) -> list[tuple]:
        return self._reader.positioned(limit)

    def scoring_inputs(self, rowids: Sequence[int]) -> tuple[list[int], np.ndarray, np.ndarray]:
        return self._vectors.scoring_inputs(rowids)

    def entries_by_rowid(self, rowids: Sequence[int]) -> dict[int, Entry]:
        return self._reader.entries_by_rowid(rowids)

    def get(self, ids: Sequence[str]) -> list[Entry]:
        return self._reader.get(ids)

    def rowid_of(self, entry_id: str) -> Optional[int]:
        return self._reader.rowid_of(entry_id)

    def warnings(self, agent_id: str) -> list[Entry]:
        return self._reader.warnings(agent_id)

    def procedure_for(self, agent_id: str, goal_key: str) -> Optional[Entry]:
        return self._reader.procedure_for(agent_id, goal_key)

    def procedure_keyed(self, goal_key: str) -> Optional[Entry]:
        return self._reader.procedure_keyed(goal_key)

    def procedures(self, agent_id: str) -> list[Entry]:
        return self._reader.procedures(agent_id)

    def decay_inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
        return self._reader.decay_inputs()

    # -- the vector index
    # ----------------------------------------------------------------------------
    def save_index(self) -> None:
        self._vectors.save()

    def wait_indexed(self, timeout: Optional[float] = None) -> bool:
        return self._vectors.wait_indexed(timeout)

    def index_backlog(self) -> int:
        return self._vectors.backlog()

    # -- operator views
    # ------------------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        return views.counts(self._db)

    def ids(self, working: bool = False) -> list[str]:
        return views.ids(self._db, working)

    def __len__(self) -> int:
        return views.size(self._db)

    def integrity(self) -> dict:
        return views.integrity(self._db, self._vectors)

    def index_health(self) -> dict[str, int]:
        return views.index_health(self._db, self._vectors)

    def disk(self) -> dict:
        return views.disk(self.path)

    @property
    def revision(self) -> int:
        """Count committed writes since the store opened (a view compares it to redraw)."""
        return self._db.revision

    def probe_write(self) -> bool:
        """Try a write that changes nothing; True if the store can write again.

        After a failed write, health asks this (rarely) so that a disk made writable again reads
        as healthy before the next real write comes.
        """
        try:
            with self._db.transaction() as conn:
                conn.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
            return True
        except StoreUnavailable:
            return False

    @property
    def write_error(self) -> Optional[str]:
        """Why the last write failed, until a write succeeds; None when writes work."""
        return self._db.write_error

    def newest_stamp(self) -> Optional[float]:
        """Return the latest creation time of the memories held at open or added since.

        Kept as they are added: health compares it with the clock on every tick.
        """
        newest = self._vectors.scoring.newest
        return newest if math.isfinite(newest) else None

    def archive_count(self) -> int:
        return self._archive.count()

    def _save_snapshot(self) -> None:
        """Save what is in RAM for the next open; a failure only costs that open a full read."""
        try:
            arrays, keys = self._vectors.snapshot()
            save_snapshot(self._vectors.folder, self._stamp(), arrays,
                          {"partitions": keys, "terms": self._terms.export()})
        except (OSError, ValueError, sqlite3.Error) as exc:
            log.warning("could not save the store's RAM snapshot (%s); the next open reads SQLite",
                        exc)
            discard_snapshot(self._vectors.folder)

    def close(self) -> None:
        """Flush, let the graphs catch up and save them, stop the indexer, close the file."""
        if self._db.conn is None:
            return
        self._vectors.close()
        with self._db.lock:
            if self._db.conn is None:
                return
            try:
                self._access.flush()
                self._vectors.save()
                self._save_snapshot()
            finally:
                self._vectors.indexer.stop()
                self._db.close()
