"""Long-term memory on disk: SQLite as the source of truth, FAISS partitions kept in step with it.

SQLite (WAL) holds entries with their embeddings, the entity graph (entry-entity edges, relations
with valid-from/valid-to), derivation edges, goals and the archive; an FTS5 table, kept in sync by
triggers, serves lexical recall. The vector partitions are rebuilt from SQLite at open, and saved
HNSW graphs are reused only when every row they index is still in SQLite (rows they lack are the
partition's tail), so a missing, stale or corrupt index file costs a rebuild, never a wrong answer.
Embeddings are stored as float16 by default (``store.embedding_precision``): half the bytes a
commit writes and a restart reads, while the rounding (a relative 5e-4 per component) is far below
the noise of the int8 embedding model itself. The vectors searched are the stored ones, read back,
so a store reopened answers exactly as before. A vector float16 cannot hold is stored as float32;
each row's blob length says which it is, so stores written with either setting read alike.

A background thread, ``_GraphIndexer``, moves committed rows into the graphs, and rebuilds a graph
that superseded facts have crowded; until a row is in a graph it is searched exactly, so an entry is
recallable the moment its id is returned.

An id is handed out only after its transaction committed: what a caller was told is stored is on
disk (``synchronous=FULL`` survives a power cut, ``NORMAL`` a process crash).
"""
from __future__ import annotations

import contextlib
import itertools
import re
import unicodedata
import logging
import os
import math
import sqlite3
import threading
import time
import uuid
import weakref
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np
import sqlite_utils

from brainmem_ros.errors import InvalidRequest, StoreUnavailable
from brainmem_ros.rerank_inputs import RerankInputs
from brainmem_ros.trace import Entry, Position, Relation, Zone, new_ids
from brainmem_ros.validation import check_embedding, check_position, check_unit
from brainmem_ros.vector_index import IndexSettings, Partition, insert_on_one_thread

__all__ = ["LongTermStore", "SHARED_OWNER"]

log = logging.getLogger("brainmem_ros.long_term")
SCHEMA_VERSION = 1
SHARED_OWNER = "\x00shared"
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"[^\W_]+")
# Every column supersession reads, so its lookup never leaves the index (``_widen_current_relations_index``).
# valid_to is always NULL here, but SQLite 3.40 counts an index as covering only when it holds every
# column the query names, including those of the index's own WHERE.
_CURRENT_RELATIONS_INDEX = ("CREATE INDEX relations_current ON relations(agent_id, subject, predicate, object,"
                            " zone, valid_from, entry, valid_to) WHERE valid_to IS NULL")
_CURRENT_VALUE = ("SELECT id, entry, valid_from FROM relations WHERE agent_id = ? AND subject = ? AND predicate = ?"
                  " AND valid_to IS NULL AND zone IN ('semantic', 'episodic') AND object {} ?")
_OTHER_CURRENT_VALUES = f"{_CURRENT_VALUE.format('<')} UNION ALL {_CURRENT_VALUE.format('>')}"
# WAL pages before SQLite copies them back into the database file. The default (1,000 pages, 4 MB)
# is less than one commit of 1,000 entries, so every such commit also ran a checkpoint; pages that
# several commits touch are now written back once (commit of 1,000 entries at 90-100k: 44 -> 22 ms).
# The WAL may grow to about 40 MB between checkpoints; it is as durable as the database file.
WAL_CHECKPOINT_PAGES = 10000
_GRAPH_SCAN = 32  # most recent mentions of an entity that graph recall looks at
_INDEX_CHUNK = 256  # rows per graph insertion (~20 ms at 100k): a retrieval waits behind at most one; smaller chunks cost ingest GIL hand-offs (64: 4.7k/s against 5.7k/s)
EMBEDDING_PRECISIONS = {"float16": np.float16, "float32": np.float32}
_FLOAT16_MAX = float(np.finfo(np.float16).max)
_COLUMNS = ("rowid, id, agent_id, shared, zone, content, importance, created, last_access, "
            "access_count, source, confidence, location, x, y, z, superseded, warning, strength, goal_key")


def fts_tokens(text: str) -> set[str]:
    """Tokens as FTS5's unicode61 tokenizer (remove_diacritics 2) makes them: lower-case runs of
    letters and digits, accents removed."""
    text = text.lower()
    if text.isascii():
        return set(_ASCII_TOKEN.findall(text))
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return set(_TOKEN.findall(folded))


def _created_within(since: float, until: float, alias: str = "") -> tuple[str, list[float]]:
    """The SQL (and its parameters) that keeps entries created in [since, until]; 0 leaves a side open."""
    clause, params = "", []
    if since:
        clause, params = clause + f" AND {alias}created >= ?", params + [since]
    if until:
        clause, params = clause + f" AND {alias}created <= ?", params + [until]
    return clause, params


def _owner(agent_id: str, shared: bool) -> str:
    return SHARED_OWNER if shared else agent_id


class LongTermStore:
    """The persistent zones (episodic, semantic, procedural, goal) of every agent."""

    def __init__(self, path: str | Path, dim: int = 384, index: IndexSettings | None = None,
                 synchronous: str = "FULL", index_save_every: int = 5000, model_name: str = "",
                 embedding_precision: str = "float16"):
        self.path = Path(path).expanduser()
        self.dim = dim
        if embedding_precision not in EMBEDDING_PRECISIONS:
            raise InvalidRequest(f"embedding_precision must be one of {', '.join(EMBEDDING_PRECISIONS)},"
                                 f" not {embedding_precision!r}")
        self._stored_dtype = EMBEDDING_PRECISIONS[embedding_precision]
        self.index_settings = index or IndexSettings(dim=dim)
        self.index_save_every = index_save_every
        self._lock = threading.RLock()
        self._partitions: dict[tuple[str, str], Partition] = {}
        self._where: dict[int, tuple[str, str]] = {}
        self._pending_access: dict[int, tuple[float, float]] = {}
        self._scoring = RerankInputs()
        # The one tuple object of each partition key: ``_where`` holds 100k references to a few keys,
        # and a freshly made key put in it would have the collector walk all of it again (see
        # rerank_inputs.py).
        self._partition_keys: dict[tuple[str, str], tuple[str, str]] = {}
        # owner -> term -> number of that owner's memories containing it, for choosing lexical
        # recall's rare terms without asking FTS5 (whose vocabulary table counts documents by walking
        # each term's postings, and over every agent at once). Per owner, so that what is rare for
        # one robot does not change because another robot stored a thousand notes.
        self._df: dict[str, Counter] = defaultdict(Counter)
        self._owned: Counter = Counter()  # owner -> memories
        self._dropped_texts: list[tuple[str, str]] = []
        self._changes_since_save = 0
        self._save_due = False
        self.created_new = not self.path.exists()
        self.rebuilt_partitions: list[str] = []
        self._synchronous = 'FULL' if synchronous == 'FULL' else 'NORMAL'
        self._indexer = _GraphIndexer(self)
        self._conn = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = self._connect()
            self._identity = self._file_identity()
            self._create_schema(model_name)
        except (sqlite3.Error, OSError, StoreUnavailable) as exc:
            if self._conn is not None:  # refused (another model, another dimension): let the file go
                self._conn.close()
            if isinstance(exc, StoreUnavailable):
                raise
            raise StoreUnavailable(f"cannot open the memory store {self.path}: {exc}") from exc
        self._load_partitions()

    # -- schema ------------------------------------------------------------------------------
    def _create_schema(self, model_name: str) -> None:
        db = sqlite_utils.Database(self._conn)
        if "entries" not in db.table_names():
            with self._transaction():
                db["entries"].create({
                    "key": int, "id": str, "agent_id": str, "shared": int, "zone": str, "content": str,
                    "entity_text": str, "embedding": bytes, "importance": float, "created": float,
                    "last_access": float, "access_count": int, "source": str, "confidence": float,
                    "location": str, "x": float, "y": float, "z": float, "superseded": int,
                    "warning": int, "strength": int, "goal_key": str,
                }, not_null={"id", "agent_id", "zone", "content", "embedding", "importance", "created",
                             "last_access"},
                    defaults={"shared": 0, "access_count": 0, "superseded": 0, "warning": 0,
                              "strength": 1, "goal_key": "", "entity_text": "", "source": "",
                              "confidence": 1.0, "location": ""}, pk="key")
                db["entries"].create_index(["id"], unique=True)
                db["entries"].create_index(["agent_id", "zone", "created"])
                db.execute("CREATE INDEX entries_shared ON entries(zone) WHERE shared = 1")
                db.execute("CREATE INDEX entries_xy ON entries(x, y) WHERE x IS NOT NULL")
                db.execute("CREATE INDEX entries_goal_key ON entries(agent_id, goal_key) WHERE goal_key != ''")
                db.execute("CREATE INDEX entries_warning ON entries(agent_id) WHERE warning = 1")
                db.execute("CREATE TABLE entry_entities (entry INTEGER NOT NULL REFERENCES entries(key) "
                           "ON DELETE CASCADE, entity TEXT NOT NULL, PRIMARY KEY (entity, entry)) WITHOUT ROWID")
                db.execute("CREATE INDEX entry_entities_entry ON entry_entities(entry)")
                db.execute("CREATE TABLE relations (id INTEGER PRIMARY KEY, entry INTEGER NOT NULL "
                           "REFERENCES entries(key) ON DELETE CASCADE, agent_id TEXT NOT NULL, "
                           "shared INTEGER NOT NULL DEFAULT 0, zone TEXT NOT NULL, subject TEXT NOT NULL, predicate TEXT NOT NULL, "
                           "object TEXT NOT NULL, valid_from REAL NOT NULL, valid_to REAL, superseded_by TEXT)")
                db.execute(_CURRENT_RELATIONS_INDEX)
                db.execute("CREATE INDEX relations_subject ON relations(subject, id) WHERE valid_to IS NULL"
                           " AND zone = 'semantic' AND predicate = 'location'")
                db.execute("CREATE INDEX relations_object ON relations(object, id) WHERE valid_to IS NULL"
                           " AND zone = 'semantic' AND predicate = 'location'")
                db.execute("CREATE INDEX relations_entry ON relations(entry)")
                db.execute("CREATE INDEX relations_superseded_by ON relations(superseded_by) "
                           "WHERE superseded_by IS NOT NULL")
                db.execute("CREATE TABLE derived (entry INTEGER NOT NULL REFERENCES entries(key) "
                           "ON DELETE CASCADE, source TEXT NOT NULL, PRIMARY KEY (source, entry)) WITHOUT ROWID")
                db.execute("CREATE TABLE goals (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, parent_id TEXT, "
                           "description TEXT NOT NULL, status INTEGER NOT NULL, temporary INTEGER NOT NULL, "
                           "stamp REAL NOT NULL)")
                db.execute("CREATE TABLE archive (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, zone TEXT, "
                           "content TEXT, embedding BLOB, importance REAL, created REAL, archived REAL, "
                           "reason TEXT, record TEXT)")
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
                db["entries"].enable_fts(["content", "entity_text"], create_triggers=True,
                                         tokenize="unicode61 remove_diacritics 2")
                db.execute("CREATE VIRTUAL TABLE entries_fts_vocab USING fts5vocab(entries_fts, 'row')")
                db.execute("INSERT INTO meta VALUES ('schema_version', ?), ('dim', ?), ('model', ?)",
                           [str(SCHEMA_VERSION), str(self.dim), model_name])
        # Working-memory traces, written before an ingest is acknowledged: a store killed at any
        # moment comes back with every trace it said it had taken (the JSON snapshot holds the rest
        # of working memory, the goal stack and the entity states, and may lag a few seconds).
        self._conn.execute("CREATE TABLE IF NOT EXISTS journal (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, "
                           "stamp REAL NOT NULL, trace TEXT NOT NULL)")
        self._narrow_fts_update_trigger()
        self._index_text_per_batch()
        self._widen_current_relations_index()
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if int(meta.get("dim", self.dim)) != self.dim:
            raise StoreUnavailable(f"{self.path} holds {meta['dim']}-d embeddings, this store uses {self.dim}-d")
        if model_name and meta.get("model") and meta["model"] != model_name:
            raise StoreUnavailable(f"{self.path} was embedded with {meta['model']!r}, not {model_name!r}: set "
                                   f"embedding.backend to the one it was made with (onnx-int8 for the int8 form, "
                                   f"onnx or torch for the float model)")

    def _narrow_fts_update_trigger(self) -> None:
        """Re-index an entry's text in FTS5 only when its text changes. The trigger sqlite-utils
        creates fires on every UPDATE, so each access-count flush, decay pass or supersession also
        deleted and re-inserted the entry's FTS row, inside the write lock that retrievals wait on,
        and FTS segments piled up (five flushes of 2,000 accessed entries: 75 -> 135 ms with the old
        trigger, 66-79 ms with this one). A read-only store keeps the old trigger, which is slower
        but just as correct."""
        self._repair_schema(
            "trigger", "entries_au", lambda sql: "UPDATE OF" in sql,
            ["DROP TRIGGER entries_au",
             "CREATE TRIGGER entries_au AFTER UPDATE OF content, entity_text ON entries BEGIN"
             " INSERT INTO entries_fts (entries_fts, rowid, content, entity_text)"
             " VALUES ('delete', old.rowid, old.content, old.entity_text);"
             " INSERT INTO entries_fts (rowid, content, entity_text)"
             " VALUES (new.rowid, new.content, new.entity_text); END"],
            "the FTS trigger that fires on every update")

    def _index_text_per_batch(self) -> None:
        """``add`` puts a batch's text into FTS5 with one INSERT ... SELECT instead of the per-row
        insert trigger sqlite-utils creates: the trigger program run per row, not the tokenising,
        was most of the cost (100k entries in batches of 1,000: 4.8-5.3 s in the entries INSERT with
        the trigger, 1.8-2.4 s with the batch insert, 1.4 s with no FTS at all). A read-only store
        keeps the trigger, and ``add`` then leaves the FTS rows to it."""
        self._repair_schema("trigger", "entries_ai", lambda sql: False, ["DROP TRIGGER entries_ai"],
                            "the per-row FTS insert trigger")
        self._fts_insert_trigger = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'entries_ai'").fetchone() is not None

    def _widen_current_relations_index(self) -> None:
        """Supersession looks up the agent's current facts about (subject, predicate) once per new
        relation. A fact observed again with the same value stays current alongside the earlier
        ones, so that lookup grows with the store; with every column it reads in the index it never
        touches the table (pre-embedded ingest at 90-100k entries: 33 -> 5 ms of lookups per 1,000
        entries). A read-only store keeps the narrow index."""
        self._repair_schema("index", "relations_current", lambda sql: sql == _CURRENT_RELATIONS_INDEX,
                            ["DROP INDEX relations_current", _CURRENT_RELATIONS_INDEX],
                            "the narrow index of current relations")

    def _repair_schema(self, kind: str, name: str, up_to_date, statements: Sequence[str], kept: str) -> None:
        """Bring a store made by an earlier version up to date when it opens: replace the schema
        object ``name`` with ``statements`` unless ``up_to_date(its sql)``. A store that cannot be
        written (read-only) keeps what it has, with a warning."""
        row = self._conn.execute("SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone()
        if row is None or up_to_date(row[0]):
            return
        try:
            with self._transaction() as conn:
                for statement in statements:
                    conn.execute(statement)
        except StoreUnavailable as exc:
            log.warning("%s: kept %s (%s)", self.path, kept, exc)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=10.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _file_identity(self) -> Optional[tuple[int, int]]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _ensure_file(self) -> None:
        """Before a write: if the store file was deleted under the running store, write what this
        connection still holds back to the path (nothing stored is lost) and carry on there; if it
        was replaced by another file, refuse rather than mix two stores."""
        now = self._file_identity()
        if now == self._identity:
            return
        if now is not None:
            raise StoreUnavailable(f"{self.path} was replaced by another file while the store was open; "
                                   "refusing to write to it (restart the node to open the new file)")
        log.warning("%s was deleted while open; restoring it from the open connection", self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            restored = sqlite3.connect(str(self.path))
            self._conn.backup(restored)
            restored.close()
            old, self._conn = self._conn, self._connect()
            old.close()
            self._identity = self._file_identity()
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"{self.path} was deleted and could not be restored: {exc}") from exc

    @contextlib.contextmanager
    def _transaction(self, check_references: bool = True) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; on any error ROLLBACK, so nothing half-written stays.

        ``check_references=False``: SQLite does not check this transaction's foreign keys, for a
        writer whose every reference is to an entry it inserts itself (``add``: each edge, relation
        and derivation row looked its entry up again, 0.27 s of a 100k pre-embedded ingest)."""
        with self._lock:
            self._ensure_file()
            if not check_references:  # a no-op inside a transaction: set before BEGIN, reset after
                self._conn.execute("PRAGMA foreign_keys=OFF")
            try:
                yield from self._transaction_body()
            finally:
                if not check_references:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("PRAGMA foreign_keys=ON")

    def _transaction_body(self) -> Iterator[sqlite3.Connection]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot write to {self.path}: {exc}") from exc
        self._dropped_texts = []
        try:
            self._flush_access_locked()
            yield self._conn
            self._conn.execute("COMMIT")
            dropped, self._dropped_texts = self._dropped_texts, []
            self._count_terms(dropped, -1)
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailable(f"write to {self.path} failed, nothing was changed: {exc}") from exc
            raise

    # -- index -------------------------------------------------------------------------------
    def _graph_path(self, key: tuple[str, str]) -> Path:
        owner = "shared" if key[0] == SHARED_OWNER else "".join(c if c.isalnum() or c in "-_" else "_" for c in key[0])
        return Path(f"{self.path}.index") / f"{owner}-{uuid.uuid5(uuid.NAMESPACE_URL, key[0]).hex[:8]}-{key[1]}.faiss"

    def _load_partitions(self) -> None:
        with self._lock:
            rows = self._conn.execute(
                "SELECT rowid, agent_id, shared, zone, created, superseded, embedding, importance, last_access,"
                " confidence, content, entity_text FROM entries ORDER BY rowid").fetchall()
            self._scoring = RerankInputs()
            self._scoring.add([r[0] for r in rows],
                              np.array([(r[7], r[8], r[4], 1.0 if r[9] is None else r[9]) for r in rows],
                                       dtype=np.float64).reshape(len(rows), 4))
            self._df, self._owned = defaultdict(Counter), Counter()
            self._count_terms([(_owner(r[1], bool(r[2])), f"{r[10]} {r[11] or ''}") for r in rows], +1)
        with self._lock:
            self._warning_rowids = {r[0] for r in self._conn.execute("SELECT rowid FROM entries WHERE warning = 1")}
        grouped: dict[tuple[str, str], list] = defaultdict(list)
        for row in rows:
            grouped[(_owner(row[1], bool(row[2])), row[3])].append(row)
        for key, group in grouped.items():
            key = self._partition_keys.setdefault(key, key)
            part = Partition(self.index_settings)
            rowids = np.fromiter((r[0] for r in group), dtype=np.int64, count=len(group))
            vectors = self._decode_vectors([r[6] for r in group])
            created = np.fromiter((r[4] for r in group), dtype=np.float64, count=len(group))
            hidden = np.fromiter((bool(r[5]) for r in group), dtype=bool, count=len(group))
            part._load_arrays(rowids, vectors, created, hidden)
            if part.size >= self.index_settings.exact_below and not part.load_graph(self._graph_path(key)):
                log.info("building the vector index of %s/%s (%d entries)", key[0], key[1], part.size)
                part.build_hnsw()
                self.rebuilt_partitions.append(f"{key[0]}/{key[1]}")
            self._partitions[key] = part
            for rowid in rowids.tolist():
                self._where[rowid] = key
        self._indexer.wake()

    def save_index(self) -> None:
        """Save the approximate-search graphs. They are a cache of SQLite: a failure to save (a full
        disk) is logged, and the next start rebuilds them."""
        self._save_due = False
        self._changes_since_save = 0
        # Each partition locks itself while it is saved; the store's lock is not held, so writes go
        # on meanwhile.
        with self._lock:
            partitions = list(self._partitions.items())
        for key, part in partitions:
            if part.hnsw is not None:
                path = self._graph_path(key)
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    part.save_graph(path)
                except (OSError, RuntimeError) as exc:
                    log.warning("could not save the vector index %s (%s); it will be rebuilt at start", path, exc)

    def _encode_vectors(self, vectors: np.ndarray) -> tuple[list[bytes], np.ndarray]:
        """The blob each row of ``vectors`` is stored as, and the vectors as they read back from it
        (what the partitions must hold, so that a reopened store searches the same numbers)."""
        if self._stored_dtype is np.float32:
            return [v.tobytes() for v in vectors], vectors
        fits = np.abs(vectors).max(axis=1) <= _FLOAT16_MAX
        with np.errstate(over="ignore"):
            half = vectors.astype(np.float16)
        back = half.astype(np.float32)
        if not fits.all():  # a component beyond float16's range: that row keeps float32
            back[~fits] = vectors[~fits]
            return [h.tobytes() if ok else v.tobytes() for h, v, ok in zip(half, vectors, fits)], back
        return [h.tobytes() for h in half], back

    def _decode_vectors(self, blobs: Sequence[bytes]) -> np.ndarray:
        """Embedding blobs, float16 or float32 by their length, as one float32 matrix."""
        half = 2 * self.dim
        if all(len(b) == half for b in blobs):
            return np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(len(blobs), self.dim).astype(np.float32)
        if not any(len(b) == half for b in blobs):
            return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), self.dim).copy()
        return np.stack([np.frombuffer(b, dtype=np.float16 if len(b) == half else np.float32) for b in blobs]
                        ).astype(np.float32)

    def _index_add(self, rows: list[tuple[int, Entry]], vectors: np.ndarray) -> None:
        """``vectors[i]``: the embedding of ``rows[i]``."""
        grouped: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, (_, entry) in enumerate(rows):
            grouped[(_owner(entry.agent_id, entry.shared), entry.zone.value)].append(i)
        for key, members in grouped.items():
            group = [rows[i] for i in members]
            rowids = [r for r, _ in group]
            key = self._partition_keys.setdefault(key, key)
            part = self._partitions.get(key) or self._partitions.setdefault(key, Partition(self.index_settings))
            part.add(np.array(rowids, dtype=np.int64), vectors[members],
                     np.array([e.created for _, e in group], dtype=np.float64),
                     np.array([e.superseded for _, e in group], dtype=bool))
            self._where.update(dict.fromkeys(rowids, key))
            with self._lock:
                self._scoring.add(rowids, np.array([(float(e.importance), e.last_access, e.created, float(e.confidence))
                                                    for _, e in group], dtype=np.float64))
            self._warning_rowids.update(r for r, e in group if e.warning)
        self._note_changes(len(rows))

    def wait_indexed(self, timeout: Optional[float] = None) -> bool:
        """Block until every committed row is in its partition's graphs and no graph rebuild is due
        (True), or ``timeout`` passes."""
        return self._indexer.wait_idle(timeout)

    def index_backlog(self) -> int:
        """Rows committed but not yet in a graph (searched exactly meanwhile)."""
        return sum(part.tail for part in list(self._partitions.values()))

    def _index_work(self) -> int:
        """Work the background indexer still owes: rows for tails and due or running graph rebuilds,
        and one for a due save."""
        return sum(part.backlog for part in list(self._partitions.values())) + int(self._save_due)

    def _index_remove(self, rowids: Iterable[int]) -> None:
        touched = set()
        with self._lock:  # once for the whole batch: a pruning pass removes thousands of rows
            for rowid in rowids:
                self._warning_rowids.discard(rowid)
                self._scoring.remove(rowid)
                key = self._where.pop(rowid, None)
                if key and self._partitions[key].remove(rowid):
                    touched.add(key)
        for key in touched:
            if self._partitions[key].needs_compaction():
                self._partitions[key].compact()
        if touched:
            self._indexer.wake()  # deleted rows count towards a rebuild of the graph they were in

    def _count_terms(self, texts: Sequence[tuple[str, str]], sign: int, memories: bool = True) -> None:
        """Add (sign +1) or take away (-1) the terms of (owner, text) pairs; ``memories``: each text
        is a whole memory come or gone (not an edit of one)."""
        by_owner: dict[str, list[str]] = defaultdict(list)
        for owner, text in texts:
            by_owner[owner].append(text)
        with self._lock:
            for owner, owned in by_owner.items():
                counts = Counter(itertools.chain.from_iterable(map(fts_tokens, owned)))
                df = self._df[owner]
                if memories:
                    self._owned[owner] += sign * len(owned)
                if sign > 0:
                    df.update(counts)
                    continue
                df.subtract(counts)
                for token in counts:
                    if df[token] <= 0:
                        del df[token]
                if not df:
                    del self._df[owner]
                if self._owned.get(owner, 0) <= 0:
                    self._owned.pop(owner, None)

    def _note_changes(self, n: int) -> None:
        """Have the background indexer save the graphs every ``index_save_every`` changes, and never
        more often than every quarter of the store's size: a save rewrites whole graphs, and a missed
        save only costs a rebuild. Not the writer: saves took 0.24 s of a 100k pre-embedded ingest's
        main thread, while the indexer's core had time to spare."""
        self._changes_since_save += n
        due = max(self.index_save_every, len(self._where) // 4)
        if self.index_save_every and self._changes_since_save >= due:
            self._save_due = any(part.hnsw is not None for part in list(self._partitions.values()))

    def _visible(self, agent_id: str, zones: Sequence[Zone]) -> list[Partition]:
        zone_values = {z.value for z in zones}
        return [p for (owner, zone), p in self._partitions.items()
                if zone in zone_values and owner in (agent_id, SHARED_OWNER)]

    # -- writes ------------------------------------------------------------------------------
    # -- the working-memory journal ------------------------------------------------------------
    def journal_write(self, add: Sequence[tuple[str, str, float, str]] = (), remove: Sequence[str] = ()) -> None:
        """One transaction: journal these traces (id, agent, stamp, JSON), forget those ids."""
        if not add and not remove:
            return
        try:
            with self._transaction() as conn:
                self._journal_apply(conn, add, remove)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot write the working-memory journal in {self.path}: {exc}") from exc

    @staticmethod
    def _journal_apply(conn, add, remove) -> None:
        if remove:
            conn.executemany("DELETE FROM journal WHERE id = ?", [(i,) for i in remove])
        if add:
            conn.executemany("INSERT OR REPLACE INTO journal VALUES (?, ?, ?, ?)", list(add))

    def journal(self) -> list[tuple[str, str, str]]:
        """(id, agent, JSON) of every journaled trace, oldest first."""
        with self._lock:
            return self._conn.execute("SELECT id, agent_id, trace FROM journal ORDER BY stamp, rowid").fetchall()

    def working_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._conn.execute("SELECT agent_id, COUNT(*) FROM journal GROUP BY agent_id").fetchall())

    def add(self, entries: Sequence[Entry], supersede: Sequence[str] = ("location", "state"),
            journal_remove: Sequence[str] = ()) -> list[str]:
        """Store entries atomically; returns their ids once committed. ``journal_remove``: working
        traces these entries replace, dropped from the journal in the same transaction.

        Relations of new semantic facts and observed episodes whose predicate is in ``supersede``
        close the current relation with the same agent, subject and predicate (and mark its entry
        superseded when nothing current is left in it). Only that exact (subject, predicate) is
        touched, and history is kept: the old relation gets a valid_to and a superseded_by.
        """
        blobs, vectors = self._encode_vectors(self._validated_vectors(entries))
        now = time.time()
        added: list[tuple[int, Entry]] = []
        hidden_changes: list[tuple[int, bool]] = []
        with self._transaction(check_references=False) as conn:
            # Keys assigned here, under the write lock, so every table is filled with executemany.
            first = (conn.execute("SELECT COALESCE(MAX(key), 0) FROM entries").fetchone()[0]) + 1
            rows, edges, derived = [], [], []
            unnamed = [e for e in entries if not e.id]
            for e, entry_id in zip(unnamed, new_ids([e.zone.value[:3] for e in unnamed])):
                e.id = entry_id
            for offset, e in enumerate(entries):
                e.created = e.created or now
                e.last_access = e.last_access or e.created
                pos, rowid = e.position, first + offset
                rows.append((rowid, e.id, e.agent_id, int(e.shared), e.zone.value, e.content, " ".join(e.entities),
                             blobs[offset], float(e.importance),
                             e.created, e.last_access, e.access_count, e.source, float(e.confidence), e.location,
                             pos.x if pos else None, pos.y if pos else None, pos.z if pos else None,
                             int(e.superseded), int(e.warning), e.strength, e.goal_key))
                edges += [(rowid, name) for name in dict.fromkeys(e.entities)]
                derived += [(rowid, source) for source in e.derived_from]
                added.append((rowid, e))
            conn.executemany(
                "INSERT INTO entries (key, id, agent_id, shared, zone, content, entity_text, embedding, importance,"
                " created, last_access, access_count, source, confidence, location, x, y, z, superseded,"
                " warning, strength, goal_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            if not self._fts_insert_trigger:
                conn.execute("INSERT INTO entries_fts (rowid, content, entity_text) SELECT key, content, entity_text"
                             " FROM entries WHERE key BETWEEN ? AND ?", (first, first + len(rows) - 1))
            conn.executemany("INSERT OR IGNORE INTO entry_entities VALUES (?, ?)", edges)
            conn.executemany("INSERT OR IGNORE INTO derived VALUES (?, ?)", derived)
            insert_relations = ("INSERT INTO relations (entry, agent_id, shared, zone, subject, predicate, object,"
                                " valid_from, valid_to, superseded_by) VALUES (?,?,?,?,?,?,?,?,?,?)")
            pending: list[tuple] = []
            pending_keys: set[tuple[str, str, str]] = set()  # (agent, subject, predicate) of the functional ones
            closing: dict[int, tuple[float, str]] = {}  # relation id -> (valid_to, superseded_by), written at the end
            closed_entries: set[int] = set()
            stale_entries: list[tuple[int]] = []
            for rowid, e in added:  # in order: a later entry of the batch supersedes an earlier one
                if not e.relations:
                    continue
                functional = [r for r in e.relations
                              if r.predicate in supersede and e.zone in (Zone.SEMANTIC, Zone.EPISODIC)]
                keys = {(e.agent_id, r.subject, r.predicate) for r in functional}
                if not keys.isdisjoint(pending_keys):  # earlier entries' facts about them must be visible
                    conn.executemany(insert_relations, pending)
                    pending, pending_keys = [], set()
                pending_keys |= keys
                stale: dict[Relation, tuple[float, str]] = {}
                for rel in functional:
                    newer = self._supersede(conn, e, rel, closing, closed_entries)
                    if newer is not None:  # arrived late: a newer fact already replaced it
                        stale[rel] = newer
                pending += [(rowid, e.agent_id, int(e.shared), e.zone.value, r.subject, r.predicate, r.object,
                             e.created, *stale.get(r, (None, None))) for r in e.relations]
                if functional and len(stale) == len(functional):
                    e.superseded = True
                    stale_entries.append((rowid,))
            if pending:
                conn.executemany(insert_relations, pending)
            conn.executemany("UPDATE relations SET valid_to = ?, superseded_by = ? WHERE id = ?",
                             [(valid_to, by, rel_id) for rel_id, (valid_to, by) in closing.items()])
            conn.executemany("UPDATE entries SET superseded = 1 WHERE rowid = ?", stale_entries)
            hidden_changes += self._retire_closed(conn, closed_entries)
            self._journal_apply(conn, (), journal_remove)
        self._index_add(added, vectors)
        self._count_terms([(_owner(e.agent_id, e.shared), f"{e.content} {' '.join(e.entities)}") for _, e in added], +1)
        for rowid, hidden in hidden_changes:
            self._set_hidden(rowid, hidden)
        self._indexer.wake()  # after the batch's facts are closed: they may make a rebuild due
        return [e.id for _, e in added]

    def _supersede(self, conn, entry: Entry, rel: Relation, closing: dict[int, tuple[float, str]],
                   closed_entries: set[int]) -> Optional[tuple[float, str]]:
        """Close the agent's current facts about (subject, predicate) with another value that are not
        newer than ``entry``: put them in ``closing`` (relation id -> valid_to, superseded_by; the
        caller writes them all at once, and until then they count as closed here) and their entries in
        ``closed_entries``. If one is newer, close nothing and return its (valid_from, entry id):
        ``entry``'s relation is then history the moment it arrives (an older observation replayed or
        delivered late must not overwrite what was seen after it). One statement, two index seeks:
        the other values are asked for as the ranges either side of this one, since ``object != ?``
        walked every current copy of the same value (a state seen open hundreds of times); 7 against
        9.5 us a lookup at 100k. Usually a single current fact comes back."""
        key = (entry.agent_id, rel.subject, rel.predicate, rel.object)
        current = [row for row in conn.execute(_OTHER_CURRENT_VALUES, key + key) if row[0] not in closing]
        if not current:
            return None
        newer = [(valid_from, entry_rowid) for _, entry_rowid, valid_from in current if valid_from > entry.created]
        if newer:
            valid_from, entry_rowid = min(newer)
            return valid_from, conn.execute("SELECT id FROM entries WHERE rowid = ?", (entry_rowid,)).fetchone()[0]
        for rel_id, entry_rowid, _ in current:
            closing[rel_id] = (entry.created, entry.id)
            closed_entries.add(entry_rowid)
        return None

    @staticmethod
    def _retire_closed(conn, closed_entries: set[int]) -> list[tuple[int, bool]]:
        """Mark superseded the entries whose relations were all closed by this batch (once, at its
        end: an entry closed twice in one batch is looked at once)."""
        if not closed_entries:
            return []
        rowids = sorted(closed_entries)
        still_current: set[int] = set()
        for start in range(0, len(rowids), 500):
            chunk = rowids[start:start + 500]
            still_current.update(r[0] for r in conn.execute(
                f"SELECT DISTINCT entry FROM relations WHERE entry IN ({','.join('?' * len(chunk))})"
                f" AND valid_to IS NULL", chunk))
        retired = [r for r in rowids if r not in still_current]
        conn.executemany("UPDATE entries SET superseded = 1 WHERE rowid = ?", [(r,) for r in retired])
        return [(r, True) for r in retired]

    def _set_hidden(self, rowid: int, hidden: bool) -> None:
        key = self._where.get(rowid)
        if key:
            self._partitions[key].set_hidden(rowid, hidden)

    def _validated_vectors(self, entries: Sequence[Entry]) -> np.ndarray:
        """Check every entry before anything is written, and hand back their embeddings as one
        float32 matrix: stacked by one numpy call and checked for NaN in one pass (one array per
        entry cost 0.24 s of a 100k pre-embedded ingest); an embedding of the wrong length is then
        looked for one by one, to name it."""
        for e in entries:
            if not isinstance(e.zone, Zone) or e.zone is Zone.WORKING:
                raise InvalidRequest(f"entries stored long-term need a long-term zone, not {e.zone!r}")
            check_unit(e.importance, "importance")
            check_unit(e.confidence, "confidence")
            check_position(e.position)
        if not entries:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            vectors = np.array([e.embedding for e in entries], dtype=np.float32)
        except (TypeError, ValueError):
            vectors = None
        if vectors is None or vectors.shape != (len(entries), self.dim):
            for e in entries:  # the one that does not fit, named
                check_embedding(e.embedding, self.dim)
            raise InvalidRequest(f"embeddings must be {self.dim} numbers each")
        if not np.isfinite(vectors).all():
            raise InvalidRequest("embedding contains NaN or infinite values")
        return vectors

    def strengthen(self, entry_id: str, importance: float, content: Optional[str] = None,
                   embedding: Optional[np.ndarray] = None, confidence: Optional[float] = None) -> None:
        """A repeat of what is known: one entry grows stronger instead of a copy piling up."""
        if embedding is not None:
            embedding = check_embedding(embedding, self.dim)
        with self._transaction() as conn:
            row = conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()
            if not row:
                raise InvalidRequest(f"unknown memory id {entry_id!r}")
            conn.execute("UPDATE entries SET strength = strength + 1, importance = ?, last_access = ?,"
                         " confidence = COALESCE(?, confidence) WHERE rowid = ?",
                         (float(np.clip(importance, 0, 1)), time.time(), confidence, row[0]))
            replaced = None
            if content is not None:
                old = conn.execute("SELECT content, entity_text, agent_id, shared FROM entries WHERE rowid = ?",
                                   (row[0],)).fetchone()
                conn.execute("UPDATE entries SET content = ? WHERE rowid = ?", (content, row[0]))
                owner = _owner(old[2], bool(old[3]))
                replaced = ((owner, f"{old[0]} {old[1] or ''}"), (owner, f"{content} {old[1] or ''}"))
            if embedding is not None:
                (blob,), stored = self._encode_vectors(embedding[None, :])
                embedding = stored[0]
                conn.execute("UPDATE entries SET embedding = ? WHERE rowid = ?", (blob, row[0]))
        if replaced:
            self._count_terms([replaced[0]], -1, memories=False)
            self._count_terms([replaced[1]], +1, memories=False)
        with self._lock:
            self._scoring.touch(row[0], float(np.clip(importance, 0, 1)), time.time(),
                                None if confidence is None else float(confidence))
        if embedding is not None:
            key = self._where.get(row[0])
            part = self._partitions.get(key) if key else None
            if part is not None:
                part.set_vector(row[0], embedding)

    def set_importance(self, entry_ids: Sequence[str], importance: Sequence[float]) -> int:
        if not entry_ids:
            return 0
        with self._transaction() as conn:
            now = time.time()
            cur = conn.executemany("UPDATE entries SET importance = ?, last_access = ? WHERE id = ?",
                                   [(float(np.clip(v, 0, 1)), now, i) for i, v in zip(entry_ids, importance)])
            changed = dict(zip(entry_ids, importance))
            for rowid, entry_id in conn.execute(
                    f"SELECT rowid, id FROM entries WHERE id IN ({','.join('?' * len(changed))})", list(changed)):
                self._scoring.touch(rowid, float(np.clip(changed[entry_id], 0, 1)), now)
            return cur.rowcount

    def record_access(self, rowids: Sequence[int], importance: Sequence[float], now: float) -> None:
        """Buffered: access counts are statistics, flushed with the next write or at close."""
        with self._lock:
            for rowid, value in zip(rowids, importance):
                count, _ = self._pending_access.get(rowid, (0, 0.0))
                self._pending_access[rowid] = (count + 1, float(value))
                self._scoring.touch(rowid, float(value), now)
            self._access_time = now

    def _flush_access_locked(self) -> None:
        if not self._pending_access:
            return
        now = getattr(self, "_access_time", time.time())
        self._conn.executemany(
            "UPDATE entries SET access_count = access_count + ?, importance = ?, last_access = ? WHERE rowid = ?",
            [(c, v, now, r) for r, (c, v) in self._pending_access.items()])
        self._pending_access.clear()

    def flush(self) -> None:
        if self._pending_access:
            with self._transaction():
                pass

    def upsert_goal(self, goal) -> None:
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO goals VALUES (?,?,?,?,?,?,?)",
                         (goal.id, goal.agent_id, goal.parent_id, goal.description, int(goal.status),
                          int(goal.temporary), goal.stamp))

    # -- deletion, archive -------------------------------------------------------------------
    def delete(self, agent_id: str, ids: Sequence[str] = (), entities: Sequence[str] = ()) -> int:
        """Delete entries (by id or by entity) with everything that points at them.

        Edges, relations and FTS rows go with the entry (cascades and triggers); entries derived from
        a deleted one (procedures quoting it) go too; a fact a deleted entry had superseded becomes
        current again, so deleting a wrong observation restores the truth it displaced.
        """
        if not agent_id:
            raise InvalidRequest("explicit deletion needs an agent_id")
        with self._transaction() as conn:
            rowids = set()
            if ids:
                found = conn.execute(
                    f"SELECT rowid, id FROM entries WHERE agent_id = ? AND id IN ({','.join('?' * len(ids))})",
                    [agent_id, *ids]).fetchall()
                missing = set(ids) - {r[1] for r in found}
                if missing:
                    raise InvalidRequest(f"no memory of agent {agent_id!r} with id(s): {', '.join(sorted(missing))}")
                rowids |= {r[0] for r in found}
            if entities:
                rowids |= {r[0] for r in conn.execute(
                    f"SELECT DISTINCT ee.entry FROM entry_entities ee JOIN entries e ON e.rowid = ee.entry"
                    f" WHERE e.agent_id = ? AND ee.entity IN ({','.join('?' * len(entities))})",
                    [agent_id, *entities])}
            frontier = set(rowids)
            while frontier:  # entries derived from deleted ones, transitively
                ids_now = [r[0] for r in conn.execute(
                    f"SELECT id FROM entries WHERE rowid IN ({','.join('?' * len(frontier))})", list(frontier))]
                derived = {r[0] for r in conn.execute(
                    f"SELECT entry FROM derived WHERE source IN ({','.join('?' * len(ids_now))})", ids_now)}
                frontier = derived - rowids
                rowids |= frontier
            reopened = self._drop_rows(conn, rowids)
        self._index_remove(rowids)
        for rowid in reopened:
            self._set_hidden(rowid, False)
        return len(rowids)

    def _drop_rows(self, conn, rowids: set[int]) -> list[int]:
        """Delete rows; reopen the facts they superseded. Returns rowids made current again."""
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        rows = conn.execute(f"SELECT id, content, entity_text, agent_id, shared FROM entries WHERE rowid IN ({marks})",
                            list(rowids)).fetchall()
        ids = [r[0] for r in rows]
        self._dropped_texts.extend((_owner(r[3], bool(r[4])), f"{r[1]} {r[2] or ''}") for r in rows)
        reopened = []
        if ids:
            id_marks = ",".join("?" * len(ids))
            for rel_id, entry_rowid, agent, subject, predicate in conn.execute(
                    f"SELECT id, entry, agent_id, subject, predicate FROM relations WHERE superseded_by IN ({id_marks})"
                    f" AND entry NOT IN ({marks})", [*ids, *rowids]).fetchall():
                newer = conn.execute(
                    f"SELECT 1 FROM relations WHERE agent_id = ? AND subject = ? AND predicate = ? AND valid_to IS NULL"
                    f" AND entry NOT IN ({marks})", [agent, subject, predicate, *rowids]).fetchone()
                if newer:
                    continue
                conn.execute("UPDATE relations SET valid_to = NULL, superseded_by = NULL WHERE id = ?", (rel_id,))
                conn.execute("UPDATE entries SET superseded = 0 WHERE rowid = ?", (entry_rowid,))
                reopened.append(entry_rowid)
        conn.execute(f"DELETE FROM entries WHERE rowid IN ({marks})", list(rowids))
        return reopened

    def archive_rows(self, rowids: Sequence[int], reason: str, hard_delete: bool) -> int:
        if not len(rowids):
            return 0
        now = time.time()
        rowid_list = [int(r) for r in rowids]
        with self._transaction() as conn:
            for start in range(0, len(rowid_list), 500):
                chunk = rowid_list[start:start + 500]
                marks = ",".join("?" * len(chunk))
                if not hard_delete:
                    conn.execute(
                        f"INSERT OR REPLACE INTO archive SELECT id, agent_id, zone, content, embedding, importance,"
                        f" created, ?, ?, json_object('source', source, 'confidence', confidence, 'entities',"
                        f" entity_text, 'access_count', access_count, 'location', location, 'shared', shared,"
                        f" 'warning', warning, 'strength', strength) FROM entries WHERE rowid IN ({marks})",
                        [now, reason, *chunk])
                self._drop_rows(conn, set(chunk))
        self._index_remove(rowid_list)
        return len(rowid_list)

    # -- reads -------------------------------------------------------------------------------
    def vector_search(self, query: np.ndarray, agent_id: str, zones: Sequence[Zone], k: int,
                      since: float = 0.0, until: float = 0.0, include_superseded: bool = False,
                      exact: bool = False) -> list[tuple[int, float]]:
        with self._lock:
            results: list[tuple[int, float]] = []
            for part in self._visible(agent_id, zones):
                rowids, sims = part.search(query, k, since, until, include_superseded, exact)
                results.extend(zip(rowids.tolist(), sims.tolist()))
        results.sort(key=lambda item: -item[1])
        return results[:k]

    def lexical_search(self, terms: Sequence[str], agent_id: str, zones: Sequence[Zone], k: int,
                       include_superseded: bool = False, max_df: float = 1.0, since: float = 0.0,
                       until: float = 0.0) -> list[tuple[int, float]]:
        """FTS5 bm25 over content and entity names; any term may match (OR), rarer terms weigh more.

        Terms found in more than ``max_df`` of the memories the caller sees (its own and the shared
        ones) are left out: they are what embeddings already capture, and ranking their thousands
        of matches would dominate the call. The time range filters before the ``k`` best are taken,
        as in vector recall: filtered afterwards, a long past would fill the ``k`` and leave nothing
        from the range asked for.
        """
        if not terms or k <= 0:
            return []
        with self._lock:
            try:
                tokens = sorted({t for term in terms for t in fts_tokens(term)})
                if max_df < 1.0:
                    owners = {agent_id, SHARED_OWNER}
                    limit = max(3, max_df * max(1, sum(self._owned.get(o, 0) for o in owners)))
                    dfs = [self._df[o] for o in owners if o in self._df]
                    tokens = [t for t in tokens if 0 < sum(df.get(t, 0) for df in dfs) <= limit]
                terms = tokens
                if not terms:
                    return []
                expr = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
                window, window_params = _created_within(since, until, "e.")
                zone_marks = ",".join("?" * len(zones))
                sql = (f"SELECT e.rowid, -bm25(entries_fts) FROM entries_fts JOIN entries e ON e.rowid = entries_fts.rowid"
                       f" WHERE entries_fts MATCH ? AND (e.agent_id = ? OR e.shared = 1) AND e.zone IN ({zone_marks})"
                       f"{'' if include_superseded else ' AND e.superseded = 0'}{window}"
                       f" ORDER BY bm25(entries_fts) LIMIT ?")
                return [(r[0], r[1]) for r in
                        self._conn.execute(sql, [expr, agent_id, *[z.value for z in zones], *window_params, k])]
            except sqlite3.OperationalError as exc:
                log.warning("lexical recall skipped: %s", exc)
                return []

    def entity_entries(self, entities: Sequence[str], agent_id: str, zones: Sequence[Zone], limit: int,
                       include_superseded: bool = False, per_entity: int = 0, since: float = 0.0,
                       until: float = 0.0) -> list[tuple[int, str]]:
        """Memories about each entity, most recent first (walks the (entity, entry) key backwards,
        so an entity named in thousands of memories costs no more than a rare one)."""
        if not entities or limit <= 0:
            return []
        per_entity = per_entity or limit
        window, window_params = _created_within(since, until, "e.")
        # Only the entity's most recent mentions are looked at, so a name that fills thousands of
        # memories (mostly another agent's, or superseded) costs a bounded scan.
        sql = (f"SELECT ee.entry, ee.entity FROM (SELECT entry, entity FROM entry_entities WHERE entity = ?"
               f" ORDER BY entry DESC LIMIT {_GRAPH_SCAN}) ee JOIN entries e ON e.rowid = ee.entry"
               f" WHERE (e.agent_id = ? OR e.shared = 1)"
               f" AND e.zone IN ({','.join('?' * len(zones))})"
               f"{'' if include_superseded else ' AND e.superseded = 0'}{window}"
               f" ORDER BY ee.entry DESC LIMIT ?")
        out: list[tuple[int, str]] = []
        with self._lock:
            for name in entities:
                out += self._conn.execute(sql, [name, agent_id, *[z.value for z in zones], *window_params,
                                                per_entity]).fetchall()
                if len(out) >= limit:
                    break
        return out[:limit]

    def neighbours(self, entities: Sequence[str], agent_id: str, exclude: Sequence[str] = (),
                   fanout: int = 1000) -> list[str]:
        """Entities one hop away through current location facts (either direction), most recent first."""
        if not entities:
            return []
        # One bounded, index-ordered branch per entity and direction: with an IN list over several
        # entities SQLite sorted every current fact about them (0.7 ms for two common names).
        branch = ("SELECT * FROM (SELECT {other} AS name, id FROM relations WHERE {this} = ? AND valid_to IS NULL"
                  " AND zone = 'semantic' AND predicate = 'location' AND (agent_id = ? OR shared = 1)"
                  " ORDER BY id DESC LIMIT ?)")
        parts, params = [], []
        for name in entities:
            for this, other in (("subject", "object"), ("object", "subject")):
                parts.append(branch.format(this=this, other=other))
                params += [name, agent_id, fanout + len(entities) + len(exclude)]
        skip = set(entities) | set(exclude)
        with self._lock:
            rows = self._conn.execute(" UNION ALL ".join(parts), params).fetchall()
        rows.sort(key=lambda r: -r[1])
        found = list(dict.fromkeys(name for name, _ in rows if name not in skip))
        return found[:fanout]

    def spatial_search(self, agent_id: str, zones: Sequence[Zone], position: Position, radius: float,
                       limit: int, include_superseded: bool = False, since: float = 0.0,
                       until: float = 0.0) -> list[tuple[int, float]]:
        window, window_params = _created_within(since, until)
        sql = (f"SELECT rowid, x, y, z FROM entries WHERE x BETWEEN ? AND ? AND y BETWEEN ? AND ?"
               f" AND (agent_id = ? OR shared = 1) AND zone IN ({','.join('?' * len(zones))})"
               f"{'' if include_superseded else ' AND superseded = 0'}{window}")
        with self._lock:
            rows = self._conn.execute(sql, [position.x - radius, position.x + radius, position.y - radius,
                                            position.y + radius, agent_id, *[z.value for z in zones],
                                            *window_params]).fetchall()
        hits = []
        for rowid, x, y, z in rows:
            d = math.dist((x, y, z or 0.0), position)
            if d <= radius:
                hits.append((rowid, d))
        hits.sort(key=lambda h: h[1])
        return hits[:limit]

    def current_facts(self, agent_id: str, subjects: Sequence[str]) -> dict[tuple[str, str], tuple[str, str]]:
        """(subject, predicate) -> (object, entry id) for the agent's current facts about subjects."""
        if not subjects:
            return {}
        sql = (f"SELECT r.subject, r.predicate, r.object, e.id FROM relations r JOIN entries e ON e.rowid = r.entry"
               f" WHERE r.agent_id = ? AND r.subject IN ({','.join('?' * len(subjects))}) AND r.valid_to IS NULL"
               f" AND r.zone = 'semantic'")
        with self._lock:
            return {(s, p): (o, i) for s, p, o, i in self._conn.execute(sql, [agent_id, *subjects])}

    def scoring_inputs(self, rowids: Sequence[int]) -> tuple[list[int], np.ndarray, np.ndarray]:
        """For live rowids: (rowids, vectors, [importance, last_access, created, confidence] rows)."""
        with self._lock:
            live, values = self._scoring.of(rowids)
            if not live:
                return [], np.zeros((0, self.dim), dtype=np.float32), np.zeros((0, 4))
            vectors = np.stack([self._partitions[self._where[r]].vector(r) for r in live])
            return live, vectors, values

    def entries_by_rowid(self, rowids: Sequence[int]) -> dict[int, Entry]:
        if not rowids:
            return {}
        rowids = list(dict.fromkeys(int(r) for r in rowids))
        out: dict[int, Entry] = {}
        with self._lock:
            for start in range(0, len(rowids), 900):
                chunk = rowids[start:start + 900]
                rows = self._conn.execute(
                    f"SELECT {_COLUMNS} FROM entries WHERE rowid IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                rels = defaultdict(list)
                for entry, s, p, o in self._conn.execute(
                        f"SELECT entry, subject, predicate, object FROM relations WHERE entry IN ({','.join('?' * len(chunk))})"
                        f" ORDER BY id", chunk):
                    rels[entry].append(Relation(s, p, o))
                ents = defaultdict(list)
                for entry, name in self._conn.execute(
                        f"SELECT entry, entity FROM entry_entities WHERE entry IN ({','.join('?' * len(chunk))})", chunk):
                    ents[entry].append(name)
                for row in rows:
                    out[row[0]] = self._row_to_entry(row, ents[row[0]], rels[row[0]], self._vector_of(row[0]))
                    pending = self._pending_access.get(row[0])
                    if pending:
                        out[row[0]].access_count += pending[0]
        return out

    def get(self, ids: Sequence[str]) -> list[Entry]:
        if not ids:
            return []
        with self._lock:
            rowids = [r[0] for r in self._conn.execute(
                f"SELECT rowid FROM entries WHERE id IN ({','.join('?' * len(ids))})", list(ids))]
        by_rowid = self.entries_by_rowid(rowids)
        by_id = {e.id: e for e in by_rowid.values()}
        return [by_id[i] for i in ids if i in by_id]

    def rowid_of(self, entry_id: str) -> Optional[int]:
        with self._lock:
            row = self._conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()
        return row[0] if row else None

    def _vector_of(self, rowid: int) -> np.ndarray:
        """The embedding from the in-memory partition (every stored row has one there)."""
        key = self._where.get(rowid)
        vector = self._partitions[key].vector(rowid) if key else None
        if vector is None:
            blob = self._conn.execute("SELECT embedding FROM entries WHERE rowid = ?", (rowid,)).fetchone()[0]
            vector = self._decode_vectors([blob])[0]
        return vector.copy()

    @staticmethod
    def _row_to_entry(row, entities, relations, emb: np.ndarray) -> Entry:
        (rowid, id_, agent, shared, zone, content, importance, created, last_access, access_count,
         source, confidence, location, x, y, z, superseded, warning, strength, goal_key) = row
        return Entry(
            id=id_, agent_id=agent, shared=bool(shared), zone=Zone(zone), content=content,
            embedding=emb, entities=entities, relations=relations,
            importance=importance, created=created, last_access=last_access, access_count=access_count,
            source=source or "", confidence=confidence if confidence is not None else 1.0,
            location=location or "", position=Position(x, y, z or 0.0) if x is not None else None,
            superseded=bool(superseded), warning=bool(warning), strength=strength, goal_key=goal_key)

    def warnings(self, agent_id: str) -> list[Entry]:
        """Remembered failures the agent may see. Their rowids are kept in memory (few, read on every
        retrieval), so this costs one indexed fetch, not a scan."""
        with self._lock:
            rowids = [r for r in self._warning_rowids if self._where.get(r, ("", ""))[0] in (agent_id, SHARED_OWNER)]
        return list(self.entries_by_rowid(rowids).values())

    def procedure_for(self, agent_id: str, goal_key: str) -> Optional[Entry]:
        with self._lock:
            row = self._conn.execute("SELECT rowid FROM entries WHERE agent_id = ? AND goal_key = ? AND zone = ?",
                                     (agent_id, goal_key, Zone.PROCEDURAL.value)).fetchone()
        return self.entries_by_rowid([row[0]])[row[0]] if row else None

    def procedures(self, agent_id: str) -> list[Entry]:
        with self._lock:
            rowids = [r[0] for r in self._conn.execute(
                "SELECT rowid FROM entries WHERE zone = 'procedural' AND (agent_id = ? OR shared = 1)", (agent_id,))]
        return list(self.entries_by_rowid(rowids).values())

    def decay_inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """rowid, importance, last_access and agent index of every entry, as arrays (one query)."""
        with self._lock:
            self.flush()
            rows = self._conn.execute("SELECT rowid, importance, last_access, agent_id FROM entries").fetchall()
        agents = sorted({r[3] for r in rows})
        agent_index = {a: i for i, a in enumerate(agents)}
        n = len(rows)
        return (np.fromiter((r[0] for r in rows), np.int64, n), np.fromiter((r[1] for r in rows), np.float64, n),
                np.fromiter((r[2] for r in rows), np.float64, n),
                np.fromiter((agent_index[r[3]] for r in rows), np.int64, n), agents)

    # -- operator views ----------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        with self._lock:
            out: dict[str, dict[str, int]] = defaultdict(dict)
            for agent, zone, n in self._conn.execute(
                    "SELECT agent_id, zone, COUNT(*) FROM entries GROUP BY agent_id, zone"):
                out[agent][zone] = n
        return dict(out)

    def ids(self, working: bool = False) -> list[str]:
        """Long-term ids in insertion order; with ``working``, then the journaled working traces."""
        with self._lock:
            ids = [r[0] for r in self._conn.execute("SELECT id FROM entries ORDER BY rowid")]
            if working:
                ids += [r[0] for r in self._conn.execute("SELECT id FROM journal ORDER BY stamp, rowid")]
            return ids

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def integrity(self) -> dict:
        """SQLite's own check, the FTS index's, and agreement of the vector index with SQLite."""
        with self._lock:
            sqlite_ok = self._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            try:
                self._conn.execute("INSERT INTO entries_fts(entries_fts) VALUES ('integrity-check')")
                fts_ok = True
            except sqlite3.Error:
                fts_ok = False
            db_rowids = {r[0] for r in self._conn.execute("SELECT rowid FROM entries")}
            orphans = self._conn.execute(
                "SELECT (SELECT COUNT(*) FROM entry_entities WHERE entry NOT IN (SELECT rowid FROM entries))"
                " + (SELECT COUNT(*) FROM relations WHERE entry NOT IN (SELECT rowid FROM entries))"
                " + (SELECT COUNT(*) FROM derived WHERE entry NOT IN (SELECT rowid FROM entries))").fetchone()[0]
            index_rowids = set(self._where)
        index_ok = index_rowids == db_rowids
        return {"sqlite_ok": sqlite_ok, "fts_ok": fts_ok, "index_ok": index_ok, "orphans": orphans,
                "integrity_ok": sqlite_ok and fts_ok and index_ok and orphans == 0}

    def archive_count(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM archive").fetchone()[0]

    def close(self) -> None:
        """Flush, let the graphs catch up and save them, stop the indexer, close the file."""
        if getattr(self, "_conn", None) is None:
            return
        self._indexer.wait_idle(timeout=60.0)
        with self._lock:
            if self._conn is None:
                return
            try:
                self.flush()
                self.save_index()
            finally:
                self._indexer.stop()
                self._conn.close()
                self._conn = None


class _GraphIndexer:
    """The background thread that moves partitions' tails into their HNSW graphs and rebuilds
    crowded ones (``Partition.index_step``), and saves them when a save is due.

    Started on the first row that needs it, so stores that stay exact (small ones, most tests) run no
    thread. It holds only a weak reference to the store: a store dropped without ``close`` does not
    live on through it.
    """

    def __init__(self, store: LongTermStore):
        self._store = weakref.ref(store)
        self._changed = threading.Condition()
        self._busy = False
        self._stopping = False
        self._thread: Optional[threading.Thread] = None

    def wake(self) -> None:
        store = self._store()
        if store is None or self._stopping or not store._index_work():
            return
        with self._changed:
            self._busy = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="brainmem-graph-indexer", daemon=True)
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
            store = self._store()
            if store is None:
                return
            failed = False
            try:
                for part in list(store._partitions.values()):
                    part.index_step(_INDEX_CHUNK)
                if store._save_due:
                    store.save_index()
            except Exception:  # a failed insertion must not end the thread; the tail stays searchable
                log.exception("vector index insertion failed; those rows stay in the exact tail")
                failed = True
            with self._changed:
                if self._stopping:
                    return
                # Checked under the condition's lock, so a wake() between the pass and here is not lost.
                if not failed and store._index_work():
                    continue
                del store
                self._busy = False
                self._changed.notify_all()
                while not self._busy and not self._stopping:
                    if not self._changed.wait(timeout=5.0) and self._store() is None:
                        return
