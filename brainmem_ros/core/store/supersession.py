"""Supersession: a newer fact about the same subject and predicate closes the older one.

Relations of new semantic facts and observed episodes whose predicate is functional (one current
value per subject: ``encoding.functional_predicates``, location and state by default) close the
current relations with the same subject and predicate that the new fact's readers see, and mark an
entry superseded when nothing current is left in it. An agent's own fact closes its own and the
shared ones (facts every agent of the store sees, the fleet's among them); a shared fact closes
those of every agent: a newer fact from another robot about the same thing replaces what this
robot believed. Only that exact (subject, predicate) is touched, and history is kept:
the old relation gets a valid_to and a superseded_by, and retrieval skips it unless asked for
history. A fact that arrives late (an older observation replayed or delivered after a newer one) is
history the moment it arrives: it must not overwrite what was seen after it.
"""
from __future__ import annotations

import sqlite3
from typing import Optional, Sequence, Set

from brainmem_ros.core.trace import Entry, Relation, Zone

__all__ = ["insert_relations"]

_CURRENT_VALUE = ("SELECT id, entry, valid_from FROM relations WHERE agent_id = ? AND subject = ?"
                  " AND predicate = ? AND valid_to IS NULL AND zone IN ('semantic', 'episodic')"
                  " AND object {} ?")
# The other current values as the index ranges either side of this one: ``object != ?`` would walk
# every current copy of the same value (a state seen open hundreds of times).
_OTHER_CURRENT_VALUES = f"{_CURRENT_VALUE.format('<')} UNION ALL {_CURRENT_VALUE.format('>')}"
_SHARED_VALUE = ("SELECT id, entry, valid_from FROM relations WHERE shared = 1 AND subject = ?"
                 " AND predicate = ? AND valid_to IS NULL AND zone IN ('semantic', 'episodic')"
                 " AND object {} ?")
_OTHER_SHARED_VALUES = f"{_SHARED_VALUE.format('<')} UNION ALL {_SHARED_VALUE.format('>')}"
_INSERT = ("INSERT INTO relations (entry, agent_id, shared, zone, subject, predicate, object,"
           " valid_from, valid_to, superseded_by) VALUES (?,?,?,?,?,?,?,?,?,?)")


def insert_relations(conn: sqlite3.Connection, added: Sequence[tuple[int, Entry]],
                     functional_predicates: Sequence[str], agents: Set[str] = frozenset()
                     ) -> list[int]:
    """Insert the relations of a batch just inserted, superseding as it goes.

    Runs inside the batch's transaction, in order: a later entry of the batch supersedes an earlier
    one. Entries found stale on arrival get ``superseded = True``. ``agents``: those with memories
    of their own in the store, whose facts a shared one closes. Returns the rowids of older entries
    this batch retired (to be hidden from default vector search).
    """
    pending: list[tuple] = []
    pending_keys: set[tuple[str, str]] = set()  # (subject, predicate) of functional ones
    closing: dict[int, tuple[float, str]] = {}  # relation id -> (valid_to, superseded_by)
    closed_entries: set[int] = set()
    stale_entries: list[tuple[int]] = []
    for rowid, e in added:
        if not e.relations:
            continue
        functional = [
            r for r in e.relations
            if r.predicate in functional_predicates and e.zone in (Zone.SEMANTIC, Zone.EPISODIC)
        ]
        keys = {(r.subject, r.predicate) for r in functional}
        if not keys.isdisjoint(pending_keys):  # earlier entries' facts about them must be visible
            conn.executemany(_INSERT, pending)
            pending, pending_keys = [], set()
        pending_keys |= keys
        stale: dict[Relation, tuple[float, str]] = {}
        scope = sorted(agents | {e.agent_id}) if e.shared else [e.agent_id]
        for rel in functional:
            newer = _supersede(conn, e, rel, scope, closing, closed_entries)
            if newer is not None:
                stale[rel] = newer
        pending += [(rowid, e.agent_id, int(e.shared), e.zone.value, r.subject, r.predicate,
                     r.object, e.created, *stale.get(r, (None, None))) for r in e.relations]
        if functional and len(stale) == len(functional):
            e.superseded = True
            stale_entries.append((rowid, ))
    if pending:
        conn.executemany(_INSERT, pending)
    conn.executemany("UPDATE relations SET valid_to = ?, superseded_by = ? WHERE id = ?",
                     [(valid_to, by, rel_id) for rel_id, (valid_to, by) in closing.items()])
    conn.executemany("UPDATE entries SET superseded = 1 WHERE rowid = ?", stale_entries)
    return _retire_closed(conn, closed_entries)


def _supersede(conn: sqlite3.Connection, entry: Entry, rel: Relation, scope: Sequence[str],
               closing: dict[int, tuple[float, str]],
               closed_entries: set[int]) -> Optional[tuple[float, str]]:
    """Close the current facts about (subject, predicate) holding another value in ``scope``.

    ``scope``: the agents whose facts the entry's readers see, besides the shared facts.

    Only those not newer than ``entry`` are closed: they go into ``closing`` (written all at once by
    the caller, and counted as closed here until then) and their entries into ``closed_entries``. If
    one is newer, nothing is closed and its (valid_from, entry id) is returned: ``entry``'s relation
    is then history the moment it arrives.
    """
    current = []
    for agent in scope:
        key = (agent, rel.subject, rel.predicate, rel.object)
        current += conn.execute(_OTHER_CURRENT_VALUES, key + key).fetchall()
    shared = (rel.subject, rel.predicate, rel.object)
    current += conn.execute(_OTHER_SHARED_VALUES, shared + shared).fetchall()
    current = list({row[0]: row for row in current if row[0] not in closing}.values())
    if not current:
        return None
    newer = [(valid_from, entry_rowid) for _, entry_rowid, valid_from in current
             if valid_from > entry.created]
    if newer:
        valid_from, entry_rowid = min(newer)
        return valid_from, conn.execute("SELECT id FROM entries WHERE rowid = ?",
                                        (entry_rowid, )).fetchone()[0]
    for rel_id, entry_rowid, _ in current:
        closing[rel_id] = (entry.created, entry.id)
        closed_entries.add(entry_rowid)
    return None


def _retire_closed(conn: sqlite3.Connection, closed_entries: set[int]) -> list[int]:
    """Mark superseded the entries whose relations were all closed by this batch.

    Done once, at the batch's end: an entry closed twice in one batch is looked at once.
    """
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
    conn.executemany("UPDATE entries SET superseded = 1 WHERE rowid = ?", [(r, ) for r in retired])
    return retired
