"""Reading long-term memory: the recall routes' queries and the reads of entries.

Every read filters on what the caller may see (its own entries and the shared ones), on zone and on
time before it takes its best, so a long past or another agent's memories never crowd out the
answer. Entries are read from SQLite only for the few memories a retrieval returns; what ranking
needs lives in RAM (``partitions``).
"""
from __future__ import annotations

import logging
import math
import sqlite3
from collections import defaultdict
from typing import Optional, Sequence

import numpy as np

from brainmem_ros.core.store.blobs import VectorCodec
from brainmem_ros.core.store.database import Database
from brainmem_ros.core.store.partitions import SHARED_OWNER, VectorPartitions
from brainmem_ros.core.store.terms import TermCounts, fts_tokens
from brainmem_ros.core.store.writes import AccessLog
from brainmem_ros.core.trace import Entry, Position, Relation, Zone

__all__ = ["Reader", "created_within"]

log = logging.getLogger("brainmem_ros.store")
GRAPH_SCAN = 32  # most recent mentions of an entity that graph recall looks at
_COLUMNS = (
    "rowid, id, agent_id, shared, zone, content, importance, created, last_access, "
    "access_count, source, confidence, location, x, y, z, superseded, warning, strength, goal_key,"
    " frame, origin")


def created_within(since: float, until: float, alias: str = "") -> tuple[str, list[float]]:
    """Return the SQL and parameters that keep entries created in [since, until].

    The SQL (and its parameters) that keeps entries created in [since, until]; 0 leaves a side open.
    """
    clause, params = "", []
    if since:
        clause, params = clause + f" AND {alias}created >= ?", params + [since]
    if until:
        clause, params = clause + f" AND {alias}created <= ?", params + [until]
    return clause, params


class Reader:
    """The store's reads, each under the store's lock."""

    def __init__(self, db: Database, vectors: VectorPartitions, terms: TermCounts,
                 codec: VectorCodec, access: AccessLog):
        self._db = db
        self._vectors = vectors
        self._terms = terms
        self._codec = codec
        self._access = access

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
        with self._db.lock:
            try:
                tokens = sorted({t for term in terms for t in fts_tokens(term)})
                if max_df < 1.0:
                    tokens = self._terms.rare(tokens, {agent_id, SHARED_OWNER}, max_df)
                terms = tokens
                if not terms:
                    return []
                expr = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
                window, window_params = created_within(since, until, "e.")
                zone_marks = ",".join("?" * len(zones))
                sql = ("SELECT e.rowid, -bm25(entries_fts) FROM entries_fts JOIN entries e ON "
                       "e.rowid = entries_fts.rowid"
                       " WHERE entries_fts MATCH ? AND (e.agent_id = ? OR e.shared = 1) AND e.zone "
                       f"IN ({zone_marks})"
                       f"{'' if include_superseded else ' AND e.superseded = 0'}{window}"
                       f" ORDER BY bm25(entries_fts) LIMIT ?")
                return [(r[0], r[1]) for r in self._db.conn.execute(
                    sql, [expr, agent_id, *[z.value for z in zones], *window_params, k])]
            except sqlite3.OperationalError as exc:
                log.warning("lexical recall skipped: %s", exc)
                return []

    def entity_entries(self, entities: Sequence[str], agent_id: str, zones: Sequence[Zone],
                       limit: int, include_superseded: bool = False, per_entity: int = 0,
                       since: float = 0.0, until: float = 0.0) -> list[tuple[int, str]]:
        """Return memories about each entity, most recent first.

        Memories about each entity, most recent first (walks the (entity, entry) key backwards, so
        an entity named in thousands of memories costs no more than a rare one).
        """
        if not entities or limit <= 0:
            return []
        per_entity = per_entity or limit
        window, window_params = created_within(since, until, "e.")
        # Only the entity's most recent mentions are looked at, so a name that fills thousands of
        # memories (mostly another agent's, or superseded) costs a bounded scan.
        sql = ("SELECT ee.entry, ee.entity FROM (SELECT entry, entity FROM entry_entities WHERE "
               "entity = ?"
               f" ORDER BY entry DESC LIMIT {GRAPH_SCAN}) ee JOIN entries e ON e.rowid = ee.entry"
               f" WHERE (e.agent_id = ? OR e.shared = 1)"
               f" AND e.zone IN ({','.join('?' * len(zones))})"
               f"{'' if include_superseded else ' AND e.superseded = 0'}{window}"
               f" ORDER BY ee.entry DESC LIMIT ?")
        out: list[tuple[int, str]] = []
        with self._db.lock:
            for name in entities:
                out += self._db.conn.execute(
                    sql,
                    [name, agent_id, *[z.value
                                       for z in zones], *window_params, per_entity]).fetchall()
                if len(out) >= limit:
                    break
        return out[:limit]

    def neighbours(self, entities: Sequence[str], agent_id: str, exclude: Sequence[str] = (),
                   fanout: int = 1000) -> list[str]:
        """Return entities one hop away through current location facts, most recent first."""
        if not entities:
            return []
        # One bounded, index-ordered branch per entity and direction: with an IN list over several
        # entities SQLite would sort every current fact about them.
        branch = (
            "SELECT * FROM (SELECT {other} AS name, id FROM relations WHERE {this} = ? AND "
            "valid_to IS NULL"
            " AND zone = 'semantic' AND predicate = 'location' AND (agent_id = ? OR shared = 1)"
            " ORDER BY id DESC LIMIT ?)")
        parts, params = [], []
        for name in entities:
            for this, other in (("subject", "object"), ("object", "subject")):
                parts.append(branch.format(this=this, other=other))
                params += [name, agent_id, fanout + len(entities) + len(exclude)]
        skip = set(entities) | set(exclude)
        with self._db.lock:
            rows = self._db.conn.execute(" UNION ALL ".join(parts), params).fetchall()
        rows.sort(key=lambda r: -r[1])
        found = list(dict.fromkeys(name for name, _ in rows if name not in skip))
        return found[:fanout]

    def spatial_search(self, agent_id: str, zones: Sequence[Zone], position: Position, frame: str,
                       radius: float, limit: int, include_superseded: bool = False,
                       since: float = 0.0, until: float = 0.0) -> list[tuple[int, float]]:
        """Memories within ``radius`` of ``position``, nearest first; only in the same frame."""
        window, window_params = created_within(since, until)
        sql = (f"SELECT rowid, x, y, z FROM entries WHERE x BETWEEN ? AND ? AND y BETWEEN ? AND ?"
               f" AND frame = ?"
               f" AND (agent_id = ? OR shared = 1) AND zone IN ({','.join('?' * len(zones))})"
               f"{'' if include_superseded else ' AND superseded = 0'}{window}")
        with self._db.lock:
            rows = self._db.conn.execute(sql, [
                position.x - radius, position.x + radius, position.y - radius, position.y + radius,
                frame, agent_id, *[z.value for z in zones], *window_params
            ]).fetchall()
        hits = []
        for rowid, x, y, z in rows:
            d = math.dist((x, y, z or 0.0), position)
            if d <= radius:
                hits.append((rowid, d))
        hits.sort(key=lambda h: h[1])
        return hits[:limit]

    def frames(self, agent_id: str) -> set[str]:
        """Frames the positions of the memories an agent may see are given in."""
        return {r[0] for r in self._db.read(
            "SELECT DISTINCT frame FROM entries WHERE x IS NOT NULL"
            " AND (agent_id = ? OR shared = 1)",
            (agent_id,))}

    def positioned(self, limit: int) -> list[tuple]:
        """Return the newest current memories that carry a position, with what each is about.

        One row per memory and subject: the subjects of its relations (``the butter is in the
        fridge`` is about the butter), or its entities when it has no relation. Rows are
        (agent, subject, x, y, z, frame, content, created, warning), newest memory first;
        superseded memories are left out, so a fact that moved shows where the thing is now.
        """
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT rowid, agent_id, x, y, z, frame, content, created, warning FROM entries"
                " WHERE x IS NOT NULL AND superseded = 0 ORDER BY created DESC LIMIT ?",
                (limit, )).fetchall()
            if not rows:
                return []
            keys = [r[0] for r in rows]
            marks = ",".join("?" * len(keys))
            subjects: dict[int, list[str]] = defaultdict(list)
            for entry, subject in self._db.conn.execute(
                    f"SELECT entry, subject FROM relations WHERE entry IN ({marks})", keys):
                subjects[entry].append(subject)
            entities: dict[int, list[str]] = defaultdict(list)
            for entry, entity in self._db.conn.execute(
                    f"SELECT entry, entity FROM entry_entities WHERE entry IN ({marks})", keys):
                entities[entry].append(entity)
        out = []
        for rowid, agent, x, y, z, frame, content, created, warning in rows:
            for subject in dict.fromkeys(subjects.get(rowid) or entities.get(rowid) or []):
                out.append((agent, subject, x, y, z or 0.0, frame, content, created, bool(warning)))
        return out

    def current_facts(self, agent_id: str,
                      subjects: Sequence[str]) -> dict[tuple[str, str], tuple[str, str]]:
        """Map (subject, predicate) to (object, entry id) for the agent's current facts."""
        if not subjects:
            return {}
        sql = ("SELECT r.subject, r.predicate, r.object, e.id FROM relations r JOIN entries e ON "
               "e.rowid = r.entry"
               f" WHERE r.agent_id = ? AND r.subject IN ({','.join('?' * len(subjects))}) AND "
               "r.valid_to IS NULL"
               f" AND r.zone = 'semantic'")
        with self._db.lock:
            return {
                (s, p): (o, i)
                for s, p, o, i in self._db.conn.execute(sql, [agent_id, *subjects])
            }

    def entries_by_rowid(self, rowids: Sequence[int]) -> dict[int, Entry]:
        if not rowids:
            return {}
        rowids = list(dict.fromkeys(int(r) for r in rowids))
        out: dict[int, Entry] = {}
        with self._db.lock:
            for start in range(0, len(rowids), 900):
                chunk = rowids[start:start + 900]
                rows = self._db.conn.execute(
                    f"SELECT {_COLUMNS} FROM entries WHERE rowid IN ({','.join('?' * len(chunk))})",
                    chunk).fetchall()
                rels = defaultdict(list)
                for entry, s, p, o in self._db.conn.execute(
                        "SELECT entry, subject, predicate, object FROM relations WHERE entry IN "
                        f"({','.join('?' * len(chunk))})"
                        f" ORDER BY id", chunk):
                    rels[entry].append(Relation(s, p, o))
                ents = defaultdict(list)
                for entry, name in self._db.conn.execute(
                        "SELECT entry, entity FROM entry_entities WHERE entry IN "
                        f"({','.join('?' * len(chunk))})", chunk):
                    ents[entry].append(name)
                for row in rows:
                    out[row[0]] = _row_to_entry(row, ents[row[0]], rels[row[0]],
                                                self._vector_of(row[0]))
                    out[row[0]].access_count += self._access.pending_count(row[0])
        return out

    def get(self, ids: Sequence[str]) -> list[Entry]:
        if not ids:
            return []
        with self._db.lock:
            rowids = [
                r[0] for r in self._db.conn.execute(
                    f"SELECT rowid FROM entries WHERE id IN ({','.join('?' * len(ids))})", list(
                        ids))
            ]
        by_rowid = self.entries_by_rowid(rowids)
        by_id = {e.id: e for e in by_rowid.values()}
        return [by_id[i] for i in ids if i in by_id]

    def known(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = list(ids[start:start + 500])
            found.update(r[0] for r in self._db.read(
                f"SELECT id FROM entries WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return found

    def rowid_of(self, entry_id: str) -> Optional[int]:
        with self._db.lock:
            row = self._db.conn.execute("SELECT rowid FROM entries WHERE id = ?",
                                        (entry_id, )).fetchone()
        return row[0] if row else None

    def _vector_of(self, rowid: int) -> np.ndarray:
        """Return an embedding from the in-memory partition (every stored row has one there)."""
        vector = self._vectors.vector_of(rowid)
        if vector is None:
            blob = self._db.conn.execute("SELECT embedding FROM entries WHERE rowid = ?",
                                         (rowid, )).fetchone()[0]
            vector = self._codec.decode([blob])[0]
        return vector.copy()

    def warnings(self, agent_id: str) -> list[Entry]:
        """Return the remembered failures the agent may see.

        Remembered failures the agent may see. Their rowids are kept in memory (few, read on every
        retrieval), so this costs one indexed fetch, not a scan.
        """
        with self._db.lock:
            rowids = [
                r for r in self._vectors.warning_rowids
                if self._vectors.owner_of(r) in (agent_id, SHARED_OWNER)
            ]
        return list(self.entries_by_rowid(rowids).values())

    def procedure_for(self, agent_id: str, goal_key: str) -> Optional[Entry]:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT rowid FROM entries WHERE agent_id = ? AND goal_key = ? AND zone = ?",
                (agent_id, goal_key, Zone.PROCEDURAL.value)).fetchone()
        return self.entries_by_rowid([row[0]])[row[0]] if row else None

    def procedure_keyed(self, goal_key: str) -> Optional[Entry]:
        """Return the strongest procedure of any agent for this goal, or None."""
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT rowid FROM entries WHERE goal_key = ? AND zone = ? ORDER BY strength DESC"
                " LIMIT 1", (goal_key, Zone.PROCEDURAL.value)).fetchone()
        return self.entries_by_rowid([row[0]])[row[0]] if row else None

    def procedures(self, agent_id: str) -> list[Entry]:
        with self._db.lock:
            rowids = [
                r[0] for r in self._db.conn.execute(
                    "SELECT rowid FROM entries WHERE zone = 'procedural' AND (agent_id = ? OR "
                    "shared = 1)", (agent_id, ))
            ]
        return list(self.entries_by_rowid(rowids).values())

    def decay_inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """rowid, importance, last_access and agent index of every entry, as arrays (one query)."""
        with self._db.lock:
            self._access.flush()
            rows = self._db.conn.execute(
                "SELECT rowid, importance, last_access, agent_id FROM entries").fetchall()
        agents = sorted({r[3] for r in rows})
        agent_index = {a: i for i, a in enumerate(agents)}
        n = len(rows)
        return (np.fromiter((r[0] for r in rows), np.int64,
                            n), np.fromiter((r[1] for r in rows), np.float64,
                                            n), np.fromiter((r[2] for r in rows), np.float64, n),
                np.fromiter((agent_index[r[3]] for r in rows), np.int64, n), agents)

    # -- operator views ----------------------------------------------------------------------


def _row_to_entry(row, entities, relations, emb: np.ndarray) -> Entry:
    (rowid, id_, agent, shared, zone, content, importance, created, last_access, access_count,
     source, confidence, location, x, y, z, superseded, warning, strength, goal_key, frame,
     origin) = row
    return Entry(id=id_, agent_id=agent, shared=bool(shared), zone=Zone(zone), content=content,
                 embedding=emb, entities=entities, relations=relations, importance=importance,
                 created=created, last_access=last_access, access_count=access_count, source=source
                 or "", confidence=confidence if confidence is not None else 1.0, location=location
                 or "", position=Position(x, y, z or 0.0) if x is not None else None,
                 frame=frame or "", superseded=bool(superseded), warning=bool(warning),
                 strength=strength, goal_key=goal_key, origin=origin or "")
