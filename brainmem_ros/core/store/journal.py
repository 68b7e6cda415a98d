"""The working-memory journal: traces written to SQLite before an ingest is acknowledged.

A store killed at any moment comes back with every trace it said it had taken. The JSON snapshot
holds the rest of working memory (the goal stack, the entity states) and may lag a few seconds.
"""
from __future__ import annotations

import sqlite3
from typing import Sequence

from brainmem_ros.core.errors import StoreUnavailable
from brainmem_ros.core.store.database import Database

__all__ = ["Journal", "apply"]


def apply(
    conn: sqlite3.Connection, add: Sequence[tuple[str, str, float,
                                                  str]] = (), remove: Sequence[str] = ()
) -> None:
    """Inside a transaction: journal traces (id, agent, stamp, JSON), forget ids."""
    if remove:
        conn.executemany("DELETE FROM journal WHERE id = ?", [(i, ) for i in remove])
    if add:
        conn.executemany("INSERT OR REPLACE INTO journal VALUES (?, ?, ?, ?)", list(add))


class Journal:
    """The journal table of one store."""

    def __init__(self, db: Database):
        self._db = db

    def write(self, add: Sequence[tuple[str, str, float, str]] = (),
              remove: Sequence[str] = ()) -> None:
        """One transaction: journal these traces (id, agent, stamp, JSON), forget those ids."""
        if not add and not remove:
            return
        try:
            with self._db.transaction() as conn:
                apply(conn, add, remove)
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot write the working-memory journal in {self._db.path}: {exc}") from exc

    def read(self) -> list[tuple[str, str, str]]:
        """(id, agent, JSON) of every journaled trace, oldest first."""
        return self._db.read("SELECT id, agent_id, trace FROM journal ORDER BY stamp, rowid")

    def counts(self) -> dict[str, int]:
        return dict(self._db.read("SELECT agent_id, COUNT(*) FROM journal GROUP BY agent_id"))
