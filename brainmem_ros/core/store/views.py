"""What an operator (and the crash test) asks of a store: counts, ids and an integrity verdict."""
from __future__ import annotations

import sqlite3
from collections import defaultdict

from brainmem_ros.core.store.database import Database
from brainmem_ros.core.store.partitions import VectorPartitions

__all__ = ["counts", "ids", "size", "integrity"]


def counts(db: Database) -> dict[str, dict[str, int]]:
    """Long-term memories per agent and zone."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for agent, zone, n in db.read(
            "SELECT agent_id, zone, COUNT(*) FROM entries GROUP BY agent_id, zone"):
        out[agent][zone] = n
    return dict(out)


def ids(db: Database, working: bool = False) -> list[str]:
    """Long-term ids in insertion order; with ``working``, then the journaled working traces."""
    with db.lock:
        found = [r[0] for r in db.conn.execute("SELECT id FROM entries ORDER BY rowid")]
        if working:
            found += [r[0] for r in db.conn.execute("SELECT id FROM journal ORDER BY stamp, rowid")]
        return found


def size(db: Database) -> int:
    return db.read("SELECT COUNT(*) FROM entries")[0][0]


def integrity(db: Database, vectors: VectorPartitions) -> dict:
    """Check SQLite, the FTS index, orphan rows, and the vector index against SQLite."""
    with db.lock:
        conn = db.conn
        sqlite_ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        try:
            conn.execute("INSERT INTO entries_fts(entries_fts) VALUES ('integrity-check')")
            fts_ok = True
        except sqlite3.Error:
            fts_ok = False
        db_rowids = {r[0] for r in conn.execute("SELECT rowid FROM entries")}
        orphans = conn.execute(
            "SELECT (SELECT COUNT(*) FROM entry_entities WHERE entry NOT IN (SELECT rowid FROM "
            "entries))"
            " + (SELECT COUNT(*) FROM relations WHERE entry NOT IN (SELECT rowid FROM entries))"
            " + (SELECT COUNT(*) FROM derived WHERE entry NOT IN (SELECT rowid FROM entries))"
        ).fetchone()[0]
        index_rowids = set(vectors.where)
    index_ok = index_rowids == db_rowids
    return {
        "sqlite_ok": sqlite_ok,
        "fts_ok": fts_ok,
        "index_ok": index_ok,
        "orphans": orphans,
        "integrity_ok": sqlite_ok and fts_ok and index_ok and orphans == 0
    }
