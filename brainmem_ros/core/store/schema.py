"""The store's tables, made when a file is new and brought up to date when an older one opens.

SQLite holds entries with their embeddings, the entity graph (entry-entity edges, relations with
valid-from/valid-to), derivation edges, goals, the archive and the working-memory journal; an FTS5
table serves lexical recall. A file made by an earlier version is repaired in place where that
makes it faster; a read-only file keeps what it has.
"""
from __future__ import annotations

import logging
from typing import Sequence

import sqlite_utils

from brainmem_ros.core.errors import StoreUnavailable
from brainmem_ros.core.store.database import Database
from brainmem_ros.core.store.outbox import create_fleet_tables

__all__ = ["create_schema", "SCHEMA_VERSION", "CURRENT_RELATIONS_INDEX"]

log = logging.getLogger("brainmem_ros.store")
SCHEMA_VERSION = 1
# Every column supersession reads, so its lookup never leaves the index. valid_to is always NULL
# here, but SQLite 3.40 counts an index as covering only when it holds every column the query
# names, including those of the index's own WHERE.
CURRENT_RELATIONS_INDEX = (
    "CREATE INDEX relations_current ON relations(agent_id, subject, predicate,"
    " object, zone, valid_from, entry, valid_to) WHERE valid_to IS NULL")


def create_schema(db: Database, dim: int, model_name: str, fixed_frame: str = "map") -> bool:
    """Make or update the tables; refuse a file of another dimension or model.

    Returns whether the per-row FTS insert trigger is still present (a read-only older store), in
    which case writers leave the FTS rows to it.
    """
    tables = sqlite_utils.Database(db.conn)
    if "entries" not in tables.table_names():
        with db.transaction():
            columns = {
                "key": int, "id": str, "agent_id": str, "shared": int, "zone": str, "content": str,
                "entity_text": str, "embedding": bytes, "importance": float, "created": float,
                "last_access": float, "access_count": int, "source": str, "confidence": float,
                "location": str, "x": float, "y": float, "z": float, "superseded": int,
                "warning": int, "strength": int, "goal_key": str, "frame": str,
                "origin": str}  # yapf: disable
            defaults = {
                "shared": 0, "access_count": 0, "superseded": 0, "warning": 0, "strength": 1,
                "goal_key": "", "entity_text": "", "source": "", "confidence": 1.0, "location": "",
                "frame": "", "origin": ""}  # yapf: disable
            tables["entries"].create(
                columns, pk="key", defaults=defaults,
                not_null={"id", "agent_id", "zone", "content", "embedding", "importance", "created",
                          "last_access", "frame", "origin"})
            tables["entries"].create_index(["id"], unique=True)
            tables["entries"].create_index(["agent_id", "zone", "created"])
            tables.execute("CREATE INDEX entries_shared ON entries(zone) WHERE shared = 1")
            tables.execute("CREATE INDEX entries_xy ON entries(x, y) WHERE x IS NOT NULL")
            tables.execute(
                "CREATE INDEX entries_goal_key ON entries(agent_id, goal_key) WHERE goal_key != ''")
            tables.execute("CREATE INDEX entries_warning ON entries(agent_id) WHERE warning = 1")
            tables.execute(
                "CREATE TABLE entry_entities (entry INTEGER NOT NULL REFERENCES entries(key) "
                "ON DELETE CASCADE, entity TEXT NOT NULL, PRIMARY KEY (entity, entry)) WITHOUT "
                "ROWID")
            tables.execute("CREATE INDEX entry_entities_entry ON entry_entities(entry)")
            tables.execute(
                "CREATE TABLE relations (id INTEGER PRIMARY KEY, entry INTEGER NOT NULL "
                "REFERENCES entries(key) ON DELETE CASCADE, agent_id TEXT NOT NULL, "
                "shared INTEGER NOT NULL DEFAULT 0, zone TEXT NOT NULL, subject TEXT NOT NULL, "
                "predicate TEXT NOT NULL, "
                "object TEXT NOT NULL, valid_from REAL NOT NULL, valid_to REAL, superseded_by TEXT)"
            )
            tables.execute(CURRENT_RELATIONS_INDEX)
            tables.execute(
                "CREATE INDEX relations_subject ON relations(subject, id) WHERE valid_to IS NULL"
                " AND zone = 'semantic' AND predicate = 'location'")
            tables.execute(
                "CREATE INDEX relations_object ON relations(object, id) WHERE valid_to IS NULL"
                " AND zone = 'semantic' AND predicate = 'location'")
            tables.execute("CREATE INDEX relations_entry ON relations(entry)")
            tables.execute("CREATE INDEX relations_superseded_by ON relations(superseded_by) "
                           "WHERE superseded_by IS NOT NULL")
            tables.execute(
                "CREATE TABLE derived (entry INTEGER NOT NULL REFERENCES entries(key) "
                "ON DELETE CASCADE, source TEXT NOT NULL, PRIMARY KEY (source, entry)) WITHOUT "
                "ROWID")
            tables.execute(
                "CREATE TABLE goals (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, parent_id TEXT, "
                "description TEXT NOT NULL, status INTEGER NOT NULL, temporary INTEGER NOT NULL, "
                "stamp REAL NOT NULL)")
            tables.execute(
                "CREATE TABLE archive (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, zone TEXT, "
                "content TEXT, embedding BLOB, importance REAL, created REAL, archived REAL, "
                "reason TEXT, record TEXT)")
            tables.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            tables["entries"].enable_fts(["content", "entity_text"], create_triggers=True,
                                         tokenize="unicode61 remove_diacritics 2")
            tables.execute(
                "CREATE VIRTUAL TABLE entries_fts_vocab USING fts5vocab(entries_fts, 'row')")
            tables.execute(
                "INSERT INTO meta VALUES ('schema_version', ?), ('dim', ?), ('model', ?)",
                [str(SCHEMA_VERSION), str(dim), model_name])
    # Working-memory traces, written before an ingest is acknowledged: a store killed at any
    # moment comes back with every trace it said it had taken (the JSON snapshot holds the rest
    # of working memory, the goal stack and the entity states, and may lag a few seconds).
    db.conn.execute(
        "CREATE TABLE IF NOT EXISTS journal (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, "
        "stamp REAL NOT NULL, trace TEXT NOT NULL)")
    _narrow_fts_update_trigger(db)
    _add_frames(db, fixed_frame)
    create_fleet_tables(db)
    if not db.conn.execute("SELECT 1 FROM meta WHERE key = 'generation'").fetchone():
        db.conn.execute("INSERT INTO meta VALUES ('generation', '0')")  # counted by every write
    per_row_fts_trigger = _index_text_per_batch(db)
    _widen_current_relations_index(db)
    meta = dict(db.conn.execute("SELECT key, value FROM meta").fetchall())
    if int(meta.get("dim", dim)) != dim:
        raise StoreUnavailable(
            f"{db.path} holds {meta['dim']}-d embeddings, this store uses {dim}-d")
    if model_name and meta.get("model") and meta["model"] != model_name:
        raise StoreUnavailable(
            f"{db.path} was embedded with {meta['model']!r}, not {model_name!r}: set "
            f"embedding.backend to the one it was made with (onnx-int8 for the int8 form, "
            f"onnx or torch for the float model)")
    return per_row_fts_trigger


def _narrow_fts_update_trigger(db: Database) -> None:
    """Re-index an entry's text in FTS5 only when its text changes.

    The trigger sqlite-utils creates fires on every UPDATE, so each access-count flush, decay pass
    or supersession would delete and re-insert the entry's FTS row inside the write lock that
    retrievals wait on, and FTS segments would pile up.
    """
    _repair(db, "trigger", "entries_au", lambda sql: "UPDATE OF" in sql, [
        "DROP TRIGGER entries_au",
        "CREATE TRIGGER entries_au AFTER UPDATE OF content, entity_text ON entries BEGIN"
        " INSERT INTO entries_fts (entries_fts, rowid, content, entity_text)"
        " VALUES ('delete', old.rowid, old.content, old.entity_text);"
        " INSERT INTO entries_fts (rowid, content, entity_text)"
        " VALUES (new.rowid, new.content, new.entity_text); END"
    ], "the FTS trigger that fires on every update")


def _add_frames(db: Database, fixed_frame: str) -> None:
    """Give a store made before frames were kept a frame column.

    Its positions were all given in the robot's fixed frame, so they get that frame.
    """
    columns = {row[1] for row in db.conn.execute("PRAGMA table_info(entries)")}
    if "frame" in columns:
        return
    try:
        with db.transaction() as conn:
            conn.execute("ALTER TABLE entries ADD COLUMN frame TEXT NOT NULL DEFAULT ''")
            conn.execute("UPDATE entries SET frame = ? WHERE x IS NOT NULL", (fixed_frame,))
    except StoreUnavailable as exc:
        raise StoreUnavailable(f"{db.path} predates frames and cannot be updated: {exc}") from exc


def _index_text_per_batch(db: Database) -> bool:
    """Drop the per-row FTS insert trigger: writers index a batch's text with one statement.

    The trigger program run per row, not the tokenising, was most of the cost of inserting
    entries. Returns whether the trigger is still there (a read-only store keeps it, and writers
    then leave the FTS rows to it).
    """
    _repair(db, "trigger", "entries_ai", lambda sql: False, ["DROP TRIGGER entries_ai"],
            "the per-row FTS insert trigger")
    return db.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'trigger'"
                           " AND name = 'entries_ai'").fetchone() is not None


def _widen_current_relations_index(db: Database) -> None:
    """Give supersession's lookup an index that holds every column it reads.

    A fact observed again with the same value stays current beside the earlier ones, so the lookup
    of an agent's current facts about (subject, predicate) grows with the store; a covering index
    keeps it from touching the table.
    """
    _repair(db, "index", "relations_current", lambda sql: sql == CURRENT_RELATIONS_INDEX,
            ["DROP INDEX relations_current", CURRENT_RELATIONS_INDEX],
            "the narrow index of current relations")


def _repair(db: Database, kind: str, name: str, up_to_date, statements: Sequence[str],
            kept: str) -> None:
    """Replace the schema object ``name`` with ``statements`` unless ``up_to_date(its sql)``.

    A store that cannot be written (read-only) keeps what it has, with a warning.
    """
    row = db.conn.execute("SELECT sql FROM sqlite_master WHERE type = ? AND name = ?",
                          (kind, name)).fetchone()
    if row is None or up_to_date(row[0]):
        return
    try:
        with db.transaction() as conn:
            for statement in statements:
                conn.execute(statement)
    except StoreUnavailable as exc:
        log.warning("%s: kept %s (%s)", db.path, kept, exc)
