"""Deletion and the archive: memories leave with everything that points at them.

Edges, relations and FTS rows go with the entry (cascades and triggers); entries derived from a
deleted one (procedures quoting it) go too; a fact a deleted entry had superseded becomes current
again, so deleting a wrong observation restores the truth it displaced. Forgetting archives (a copy
of the row in the ``archive`` table) unless ``forgetting.hard_delete`` is set.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from brainmem_ros.core.clock import Clock
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.store.database import Database
from brainmem_ros.core.store.outbox import Outbox
from brainmem_ros.core.store.partitions import VectorPartitions, owner
from brainmem_ros.core.store.terms import TermCounts

__all__ = ["Archive"]


class Archive:
    """Removes rows from SQLite, the partitions and the term counts together."""

    def __init__(self, db: Database, vectors: VectorPartitions, terms: TermCounts, clock: Clock,
                 outbox: Outbox):
        self._db = db
        self._outbox = outbox
        self._clock = clock
        self._vectors = vectors
        self._terms = terms

    def delete(self, agent_id: str, ids: Sequence[str] = (), entities: Sequence[str] = (),
               within: Optional[Callable] = None, missing_ok: bool = False) -> int:
        """Delete an agent's entries by id or by entity, and what was derived from them.

        What was shared with the fleet leaves a tombstone in the outbox, in the same transaction;
        ``within(conn)`` runs in it last. ``missing_ok``: ids not found are not an error (a
        tombstone for a memory never taken).
        """
        if not agent_id:
            raise InvalidRequest("explicit deletion needs an agent_id")
        dropped: list[tuple[str, str]] = []
        with self._db.transaction() as conn:
            rowids = set()
            if ids:
                found = conn.execute(
                    "SELECT rowid, id FROM entries WHERE agent_id = ? AND id IN "
                    f"({','.join('?' * len(ids))})", [agent_id, *ids]).fetchall()
                missing = set(ids) - {r[1] for r in found}
                if missing and not missing_ok:
                    raise InvalidRequest(
                        f"no memory of agent {agent_id!r} with id(s): {', '.join(sorted(missing))}")
                rowids |= {r[0] for r in found}
            if entities:
                rowids |= {
                    r[0]
                    for r in conn.execute(
                        "SELECT DISTINCT ee.entry FROM entry_entities ee JOIN entries e ON "
                        "e.rowid = ee.entry"
                        f" WHERE e.agent_id = ? AND ee.entity IN ({','.join('?' * len(entities))})",
                        [agent_id, *entities])
                }
            frontier = set(rowids)
            while frontier:  # entries derived from deleted ones, transitively
                ids_now = [
                    r[0] for r in conn.execute(
                        f"SELECT id FROM entries WHERE rowid IN ({','.join('?' * len(frontier))})",
                        list(frontier))
                ]
                derived = {
                    r[0]
                    for r in conn.execute(
                        "SELECT entry FROM derived WHERE source IN "
                        f"({','.join('?' * len(ids_now))})", ids_now)
                }
                frontier = derived - rowids
                rowids |= frontier
            if rowids:
                marks = ",".join("?" * len(rowids))
                self._outbox.enqueue_tombstones(conn, conn.execute(
                    f"SELECT id, agent_id FROM entries WHERE rowid IN ({marks})",
                    list(rowids)).fetchall())
            reopened = _drop_rows(conn, rowids, dropped)
            if within is not None:
                within(conn)
        self._terms.count(dropped, -1)
        self._vectors.remove(rowids)
        for rowid in reopened:
            self._vectors.set_hidden(rowid, False)
        return len(rowids)

    def archive_rows(self, rowids: Sequence[int], reason: str, hard_delete: bool) -> int:
        """Move rows to the archive (or delete them for good), in chunks of one transaction."""
        if not len(rowids):
            return 0
        now = self._clock()
        rowid_list = [int(r) for r in rowids]
        dropped: list[tuple[str, str]] = []
        with self._db.transaction() as conn:
            for start in range(0, len(rowid_list), 500):
                chunk = rowid_list[start:start + 500]
                marks = ",".join("?" * len(chunk))
                if not hard_delete:
                    conn.execute(
                        "INSERT OR REPLACE INTO archive SELECT id, agent_id, zone, content, "
                        "embedding,"
                        f" importance, created, ?, ?, json_object('source', source, 'confidence',"
                        " confidence, 'entities', entity_text, 'access_count', access_count, "
                        "'location',"
                        f" location, 'shared', shared, 'warning', warning, 'strength', strength)"
                        f" FROM entries WHERE rowid IN ({marks})", [now, reason, *chunk])
                _drop_rows(conn, set(chunk), dropped)
        self._terms.count(dropped, -1)
        self._vectors.remove(rowid_list)
        return len(rowid_list)

    def count(self) -> int:
        return self._db.read("SELECT COUNT(*) FROM archive")[0][0]


def _drop_rows(conn, rowids: set[int], dropped: list[tuple[str, str]]) -> list[int]:
    """Delete rows and reopen the facts they superseded; the rowids made current again.

    The (owner, text) of each row goes into ``dropped``, for the term counts once committed.
    """
    if not rowids:
        return []
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(
        f"SELECT id, content, entity_text, agent_id, shared FROM entries"
        f" WHERE rowid IN ({marks})", list(rowids)).fetchall()
    ids = [r[0] for r in rows]
    dropped.extend((owner(r[3], bool(r[4])), f"{r[1]} {r[2] or ''}") for r in rows)
    reopened = []
    if ids:
        id_marks = ",".join("?" * len(ids))
        superseded_by_these = conn.execute(
            f"SELECT id, entry, agent_id, subject, predicate FROM relations"
            f" WHERE superseded_by IN ({id_marks}) AND entry NOT IN ({marks})",
            [*ids, *rowids]).fetchall()
        for rel_id, entry_rowid, agent, subject, predicate in superseded_by_these:
            newer = conn.execute(
                f"SELECT 1 FROM relations WHERE agent_id = ? AND subject = ? AND predicate = ?"
                f" AND valid_to IS NULL AND entry NOT IN ({marks})",
                [agent, subject, predicate, *rowids]).fetchone()
            if newer:
                continue
            conn.execute("UPDATE relations SET valid_to = NULL, superseded_by = NULL WHERE id = ?",
                         (rel_id, ))
            conn.execute("UPDATE entries SET superseded = 0 WHERE rowid = ?", (entry_rowid, ))
            reopened.append(entry_rowid)
    conn.execute(f"DELETE FROM entries WHERE rowid IN ({marks})", list(rowids))
    return reopened
