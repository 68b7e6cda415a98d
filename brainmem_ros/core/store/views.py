"""What an operator (and the crash test) asks of a store: counts, ids, health and integrity."""
from __future__ import annotations

import os
import sqlite3
from collections import defaultdict
from pathlib import Path

from brainmem_ros.core.store.database import Database
from brainmem_ros.core.store.partitions import VectorPartitions

__all__ = ["counts", "ids", "size", "integrity", "index_health", "disk"]


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


def index_health(db: Database, vectors: VectorPartitions) -> dict[str, int]:
    """Rows in SQLite, rows the vector index holds, rows still waiting for their graph.

    Cheap enough for every diagnostics tick, unlike ``integrity``: a count against a dict's length.
    Waiting rows are searched exactly meanwhile, so they are found; rows missing from the index
    are not.
    """
    with db.lock:
        return {"rows": size(db), "indexed": len(vectors.where), "queued": vectors.backlog()}


def disk(path: Path) -> dict:
    """Bytes of the store's files (database, WAL, saved graphs), free bytes and writability.

    ``read_only`` is the file system's flag (a remounted or write-protected disk); ``writable``
    what the process may do to the file and its folder.
    """
    folder = path.parent
    used = 0
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            used += candidate.stat().st_size
        except OSError:
            pass
    index = Path(f"{path}.index")
    if index.is_dir():
        used += sum(f.stat().st_size for f in index.iterdir() if f.is_file())
    try:
        stats = os.statvfs(folder)
        free, read_only = stats.f_bavail * stats.f_frsize, bool(stats.f_flag & os.ST_RDONLY)
    except OSError:
        free, read_only = 0, True
    writable = os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
    return {"bytes": used, "free": free, "read_only": read_only, "writable": writable}


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
