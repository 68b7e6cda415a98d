"""The fleet's side of one robot's store: what waits to be shared, and what was taken from others.

Memories the share policy marks for the fleet go into ``fleet_outbox`` in the same transaction that
stores them, so no memory is stored without being queued, nor queued without being stored; deleting
one that was shared queues a tombstone the same way. ``fleet_applied`` names every change taken
from the server and the meta key ``fleet_cursor`` says where the next pull starts; both are written
in the transaction that applies the changes, so a replayed pull changes nothing and a robot killed
mid-pull resumes where its store says it stopped.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from brainmem_ros.core.errors import StoreUnavailable
from brainmem_ros.core.store.database import Database
from brainmem_ros.core.trace import Entry

__all__ = ["Outbox", "Change", "create_fleet_tables", "entry_record"]

_TABLES = (
    "CREATE TABLE IF NOT EXISTS fleet_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " op TEXT NOT NULL, entry_id TEXT NOT NULL, agent_id TEXT NOT NULL, record TEXT NOT NULL,"
    " embedding BLOB)",
    # Our own entries that went to the fleet: deleting one of them sends a tombstone.
    "CREATE TABLE IF NOT EXISTS fleet_shared (entry_id TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS fleet_applied (change TEXT PRIMARY KEY) WITHOUT ROWID",
    # Current facts visible to every agent: supersession looks them up by subject and predicate.
    "CREATE INDEX IF NOT EXISTS relations_shared ON relations(subject, predicate, object)"
    " WHERE valid_to IS NULL AND shared = 1",
)


def create_fleet_tables(db: Database) -> None:
    """Add the origin column and the fleet's tables to a store made before the fleet."""
    columns = {row[1] for row in db.conn.execute("PRAGMA table_info(entries)")}
    have = {row[0] for row in db.conn.execute("SELECT name FROM sqlite_master")}
    if "origin" in columns and {"fleet_outbox", "fleet_applied", "relations_shared"} <= have:
        return
    try:
        with db.transaction() as conn:
            if "origin" not in columns:
                conn.execute("ALTER TABLE entries ADD COLUMN origin TEXT NOT NULL DEFAULT ''")
            for sql in _TABLES:
                conn.execute(sql)
    except StoreUnavailable as exc:
        raise StoreUnavailable(f"{db.path} predates the fleet and cannot be updated: {exc}") \
            from exc


def entry_record(entry: Entry) -> dict:
    """Return what the fleet keeps of an entry besides its vector, as JSON-able values."""
    pos = entry.position
    return {
        "zone": entry.zone.value, "content": entry.content, "entities": list(entry.entities),
        "relations": [[r.subject, r.predicate, r.object] for r in entry.relations],
        "importance": float(entry.importance), "created": float(entry.created),
        "source": entry.source, "confidence": float(entry.confidence),
        "location": entry.location, "position": [pos.x, pos.y, pos.z] if pos else None,
        "frame": entry.frame if pos else "", "warning": bool(entry.warning),
        "strength": int(entry.strength), "goal_key": entry.goal_key
    }  # yapf: disable


@dataclass(frozen=True)
class Change:
    """One queued change: ``put`` an entry (new or updated) or ``delete`` it (a tombstone)."""

    seq: int
    op: str
    entry_id: str
    agent_id: str
    record: dict
    embedding: Optional[bytes]


class Outbox:

    def __init__(self, db: Database, shares: Optional[Callable[[Entry], bool]] = None):
        self._db = db
        self.shares = shares  # the policy; None: nothing is shared (no fleet configured)

    def enqueue(self, conn: sqlite3.Connection, entries: Sequence[Entry],
                vectors: np.ndarray) -> None:
        """Queue the entries the policy shares; inside the transaction that stores them."""
        if self.shares is None:
            return
        rows = [("put", e.id, e.agent_id, json.dumps(entry_record(e)),
                 np.asarray(v, dtype="<f4").tobytes())
                for e, v in zip(entries, vectors) if not e.origin and self.shares(e)]
        if rows:
            conn.executemany("INSERT INTO fleet_outbox (op, entry_id, agent_id, record, embedding)"
                             " VALUES (?,?,?,?,?)", rows)
            conn.executemany("INSERT OR IGNORE INTO fleet_shared VALUES (?)",
                             [(r[1], ) for r in rows])

    def enqueue_tombstones(self, conn: sqlite3.Connection,
                           dropped: Sequence[tuple[str, str]]) -> None:
        """Queue a tombstone for each deleted (id, agent) that was shared; inside the deletion."""
        if not dropped:
            return
        shared = []
        for start in range(0, len(dropped), 500):
            chunk = [entry_id for entry_id, _ in dropped[start:start + 500]]
            marks = ",".join("?" * len(chunk))
            shared += [r[0] for r in conn.execute(
                f"SELECT entry_id FROM fleet_shared WHERE entry_id IN ({marks})", chunk)]
        if not shared:
            return
        agents = dict(dropped)
        conn.executemany("INSERT INTO fleet_outbox (op, entry_id, agent_id, record) VALUES"
                         " ('delete', ?, ?, '{}')", [(i, agents[i]) for i in shared])
        conn.executemany("DELETE FROM fleet_shared WHERE entry_id = ?", [(i, ) for i in shared])

    def take(self, limit: int) -> list[Change]:
        rows = self._db.read("SELECT seq, op, entry_id, agent_id, record, embedding FROM "
                             "fleet_outbox ORDER BY seq LIMIT ?", (limit, ))
        return [Change(seq, op, entry_id, agent, json.loads(record), embedding)
                for seq, op, entry_id, agent, record, embedding in rows]

    def done(self, seqs: Sequence[int]) -> None:
        """Drop changes the server has committed (a crash before this only makes them resent)."""
        with self._db.transaction() as conn:
            conn.executemany("DELETE FROM fleet_outbox WHERE seq = ?", [(s, ) for s in seqs])

    def backlog(self) -> int:
        return self._db.read("SELECT COUNT(*) FROM fleet_outbox")[0][0]

    def cursor(self) -> tuple[str, int]:
        """Where the next pull starts: (transaction id, sequence) of the last change applied."""
        row = self._db.read("SELECT value FROM meta WHERE key = 'fleet_cursor'")
        if not row:
            return "0", 0
        xid, seq = row[0][0].split(":")
        return xid, int(seq)

    @staticmethod
    def mark(conn: sqlite3.Connection, changes: Sequence[str]) -> None:
        """Record changes as applied; inside the transaction that applies them."""
        conn.executemany("INSERT OR IGNORE INTO fleet_applied VALUES (?)", [(c, ) for c in changes])

    def save_cursor(self, cursor: tuple[str, int], changes: Sequence[str] = ()) -> None:
        """Move the cursor (once every change before it is applied), marking ``changes`` too."""
        with self._db.transaction() as conn:
            self.mark(conn, changes)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('fleet_cursor', ?)",
                         (f"{cursor[0]}:{cursor[1]}", ))

    def applied(self, changes: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(changes), 500):
            chunk = list(changes[start:start + 500])
            found.update(r[0] for r in self._db.read(
                f"SELECT change FROM fleet_applied WHERE change IN ({','.join('?' * len(chunk))})",
                chunk))
        return found
