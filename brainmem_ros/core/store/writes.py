"""Writing long-term memories: new entries in one transaction, strengthening, importance, accesses.

Every entry of a batch is checked before anything is written, so a rejected batch leaves the store
unchanged; ids are returned only after the commit. The vectors enter the partitions after the commit
(as stored, so a reopened store searches the same numbers).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from brainmem_ros.core.clock import Clock
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.store import journal
from brainmem_ros.core.store.blobs import VectorCodec
from brainmem_ros.core.store.database import Database
from brainmem_ros.core.store.outbox import Outbox
from brainmem_ros.core.store.partitions import VectorPartitions, owner
from brainmem_ros.core.store.supersession import insert_relations
from brainmem_ros.core.store.terms import TermCounts
from brainmem_ros.core.trace import Entry, Zone, new_ids
from brainmem_ros.core.validation import check_embedding, check_position, check_unit

__all__ = ["Writer", "AccessLog", "validated_vectors"]

_INSERT_ENTRY = (
    "INSERT INTO entries (key, id, agent_id, shared, zone, content, entity_text, embedding,"
    " importance, created, last_access, access_count, source, confidence, location, x, y, z,"
    " superseded, warning, strength, goal_key, frame, origin)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def validated_vectors(entries: Sequence[Entry], dim: int) -> np.ndarray:
    """Check every entry before anything is written; their embeddings as one float32 matrix.

    Stacked by one numpy call and checked for NaN in one pass; an embedding of the wrong length is
    then looked for one by one, to name it.
    """
    for e in entries:
        if not isinstance(e.zone, Zone) or e.zone is Zone.WORKING:
            raise InvalidRequest(f"entries stored long-term need a long-term zone, not {e.zone!r}")
        check_unit(e.importance, "importance")
        check_unit(e.confidence, "confidence")
        check_position(e.position)
    if not entries:
        return np.zeros((0, dim), dtype=np.float32)
    try:
        vectors = np.array([e.embedding for e in entries], dtype=np.float32)
    except (TypeError, ValueError):
        vectors = None
    if vectors is None or vectors.shape != (len(entries), dim):
        for e in entries:  # the one that does not fit, named
            check_embedding(e.embedding, dim)
        raise InvalidRequest(f"embeddings must be {dim} numbers each")
    if not np.isfinite(vectors).all():
        raise InvalidRequest("embedding contains NaN or infinite values")
    return vectors


class AccessLog:
    """Access counts, buffered: they are statistics, written with the next write or at close.

    The rerank inputs in RAM change at once, so the next retrieval already sees the new importance.
    """

    def __init__(self, db: Database, vectors: VectorPartitions, clock: Clock):
        self._db = db
        self._vectors = vectors
        self._clock = clock
        self._pending: dict[int, tuple[int, float]] = {}
        self._time: Optional[float] = None
        db.on_begin = self._flush_locked

    def record(self, rowids: Sequence[int], importance: Sequence[float], now: float) -> None:
        with self._db.lock:
            for rowid, value in zip(rowids, importance):
                count, _ = self._pending.get(rowid, (0, 0.0))
                self._pending[rowid] = (count + 1, float(value))
                self._vectors.scoring.touch(rowid, float(value), now)
            self._time = now

    def pending_count(self, rowid: int) -> int:
        """Return the accesses of ``rowid`` not yet written."""
        pending = self._pending.get(rowid)
        return pending[0] if pending else 0

    def _flush_locked(self, conn) -> None:
        if not self._pending:
            return
        now = self._time if self._time is not None else self._clock()
        conn.executemany(
            "UPDATE entries SET access_count = access_count + ?, importance = ?, last_access = ?"
            " WHERE rowid = ?", [(c, v, now, r) for r, (c, v) in self._pending.items()])
        self._pending.clear()

    def flush(self) -> None:
        if self._pending:
            with self._db.transaction():
                pass


class Writer:
    """The store's writes other than deletion (``archive``) and the journal (``journal``)."""

    def __init__(self, db: Database, vectors: VectorPartitions, terms: TermCounts,
                 codec: VectorCodec, per_row_fts_trigger: bool, clock: Clock, outbox: Outbox):
        self._db = db
        self._outbox = outbox
        self._clock = clock
        self._vectors = vectors
        self._terms = terms
        self._codec = codec
        self._per_row_fts_trigger = per_row_fts_trigger

    def add(
        self, entries: Sequence[Entry], supersede: Sequence[str] = ("location", "state"),
        journal_remove: Sequence[str] = (), within: Optional[Callable] = None
    ) -> list[str]:
        """Store entries atomically; their ids once committed.

        ``supersede``: the functional predicates (``supersession``). ``journal_remove``: working
        traces these entries replace, dropped from the journal in the same transaction. Entries
        the fleet's policy shares are queued in the outbox in it too; ``within(conn)`` runs in it
        last (a pull records what it applied).
        """
        blobs, vectors = self._codec.encode(validated_vectors(entries, self._codec.dim))
        now = self._clock()
        with self._db.transaction(check_references=False) as conn:
            added = self._insert(conn, entries, blobs, now)
            retired = insert_relations(conn, added, supersede, self._vectors.agents())
            journal.apply(conn, (), journal_remove)
            self._outbox.enqueue(conn, [e for _, e in added], vectors)
            if within is not None:
                within(conn)
        self._vectors.add(added, vectors)
        self._terms.count([(owner(e.agent_id, e.shared), f"{e.content} {' '.join(e.entities)}")
                           for _, e in added], +1)
        for rowid in retired:
            self._vectors.set_hidden(rowid, True)
        self._vectors.indexer.wake(
        )  # after the batch's facts are closed: they may make a rebuild due
        return [e.id for _, e in added]

    def _insert(self, conn, entries: Sequence[Entry], blobs: list[bytes],
                now: float) -> list[tuple[int, Entry]]:
        """Insert the entries, their text, entity edges and derivations; (rowid, entry) pairs.

        Keys are assigned here, under the write lock, so every table is filled with executemany.
        """
        first = conn.execute("SELECT COALESCE(MAX(key), 0) FROM entries").fetchone()[0] + 1
        rows, edges, derived, added = [], [], [], []
        unnamed = [e for e in entries if not e.id]
        for e, entry_id in zip(unnamed, new_ids([e.zone.value[:3] for e in unnamed])):
            e.id = entry_id
        for offset, e in enumerate(entries):
            e.created = e.created or now
            e.last_access = e.last_access or e.created
            pos, rowid = e.position, first + offset
            rows.append(
                (rowid, e.id, e.agent_id,
                 int(e.shared), e.zone.value, e.content, " ".join(e.entities), blobs[offset],
                 float(e.importance), e.created, e.last_access, e.access_count, e.source,
                 float(e.confidence), e.location, pos.x if pos else None, pos.y if pos else None,
                 pos.z if pos else None, int(e.superseded), int(e.warning), e.strength, e.goal_key,
                 e.frame if pos else "", e.origin))
            edges += [(rowid, name) for name in dict.fromkeys(e.entities)]
            derived += [(rowid, source) for source in e.derived_from]
            added.append((rowid, e))
        conn.executemany(_INSERT_ENTRY, rows)
        if not self._per_row_fts_trigger:
            conn.execute(
                "INSERT INTO entries_fts (rowid, content, entity_text) SELECT key, content,"
                " entity_text FROM entries WHERE key BETWEEN ? AND ?",
                (first, first + len(rows) - 1))
        conn.executemany("INSERT OR IGNORE INTO entry_entities VALUES (?, ?)", edges)
        conn.executemany("INSERT OR IGNORE INTO derived VALUES (?, ?)", derived)
        return added

    def strengthen(self, entry_id: str, importance: float, content: Optional[str] = None,
                   embedding: Optional[np.ndarray] = None, confidence: Optional[float] = None,
                   within: Optional[Callable] = None) -> None:
        """Strengthen one entry on a repeat of what it says, instead of storing a copy."""
        if embedding is not None:
            embedding = check_embedding(embedding, self._codec.dim)
        importance = float(np.clip(importance, 0, 1))
        now = self._clock()
        with self._db.transaction() as conn:
            row = conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry_id, )).fetchone()
            if not row:
                raise InvalidRequest(f"unknown memory id {entry_id!r}")
            rowid = row[0]
            conn.execute(
                "UPDATE entries SET strength = strength + 1, importance = ?, last_access = ?,"
                " confidence = COALESCE(?, confidence) WHERE rowid = ?",
                (importance, now, confidence, rowid))
            replaced = None
            if content is not None:
                old = conn.execute(
                    "SELECT content, entity_text, agent_id, shared FROM entries"
                    " WHERE rowid = ?", (rowid, )).fetchone()
                conn.execute("UPDATE entries SET content = ? WHERE rowid = ?", (content, rowid))
                who = owner(old[2], bool(old[3]))
                replaced = ((who, f"{old[0]} {old[1] or ''}"), (who, f"{content} {old[1] or ''}"))
            if embedding is not None:
                (blob, ), stored = self._codec.encode(embedding[None, :])
                embedding = stored[0]
                conn.execute("UPDATE entries SET embedding = ? WHERE rowid = ?", (blob, rowid))
            if within is not None:
                within(conn)
        if replaced:
            self._terms.count([replaced[0]], -1, memories=False)
            self._terms.count([replaced[1]], +1, memories=False)
        self._vectors.touch(rowid, importance, now,
                            None if confidence is None else float(confidence))
        if embedding is not None:
            self._vectors.set_vector(rowid, embedding)

    def set_importance(self, entry_ids: Sequence[str], importance: Sequence[float]) -> int:
        if not entry_ids:
            return 0
        now = self._clock()
        with self._db.transaction() as conn:
            cur = conn.executemany(
                "UPDATE entries SET importance = ?, last_access = ? WHERE id = ?",
                [(float(np.clip(v, 0, 1)), now, i) for i, v in zip(entry_ids, importance)])
            changed = dict(zip(entry_ids, importance))
            for rowid, entry_id in conn.execute(
                    f"SELECT rowid, id FROM entries WHERE id IN ({','.join('?' * len(changed))})",
                    list(changed)):
                self._vectors.scoring.touch(rowid, float(np.clip(changed[entry_id], 0, 1)), now)
            return cur.rowcount

    def upsert_goal(self, goal) -> None:
        with self._db.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO goals VALUES (?,?,?,?,?,?,?)",
                         (goal.id, goal.agent_id, goal.parent_id, goal.description, int(
                             goal.status), int(goal.temporary), goal.stamp))
