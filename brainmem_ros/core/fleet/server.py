"""The fleet's PostgreSQL server, as a robot sees it and as its administrator sets it up.

One table, ``memories``, is an append-only log of changes: a robot inserts its puts and tombstones
(and removes its own puts of a memory it deleted, so nothing of it stays behind), and reads the
others' in the order their transactions finished. Row-level security lets a robot write only rows
in its own name (its PostgreSQL role) and read only rows shared with it.

Reading in commit order: a row is read once every transaction older than it has finished
(``pg_snapshot_xmin``), ordered by transaction id; the cursor is the (transaction id, sequence) of
the last row applied. A sequence number alone is not enough: a transaction that took a smaller
number can commit after a larger one was read.
"""
from __future__ import annotations

import contextlib
import json
import math
from typing import Sequence

from brainmem_ros.core.errors import StoreUnavailable
from brainmem_ros.core.store.outbox import Change

__all__ = ["FleetServer", "SCHEMA_VERSION", "create_schema", "add_robot", "ROBOTS_ROLE"]

SCHEMA_VERSION = "1"
ROBOTS_ROLE = "brainmem_robots"
_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS brainmem_meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memories ("
    " xid xid8 NOT NULL DEFAULT pg_current_xact_id(), seq bigserial,"
    " robot text NOT NULL DEFAULT current_user, change bigint NOT NULL,"
    " op text NOT NULL CHECK (op IN ('put', 'delete')), entry_id text NOT NULL,"
    " agent_id text NOT NULL, model text NOT NULL, dim integer NOT NULL, record jsonb NOT NULL,"
    " embedding bytea, audience text[] NOT NULL DEFAULT '{}',"
    " pushed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (robot, change))",
    "CREATE INDEX IF NOT EXISTS memories_order ON memories (xid, seq)",
    "CREATE INDEX IF NOT EXISTS memories_entry ON memories (robot, entry_id)",
    "ALTER TABLE memories ENABLE ROW LEVEL SECURITY",
    f"DO $$ BEGIN CREATE ROLE {ROBOTS_ROLE} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL;"
    " END $$",
    "DROP POLICY IF EXISTS own_rows_in ON memories",
    f"CREATE POLICY own_rows_in ON memories FOR INSERT TO {ROBOTS_ROLE}"
    " WITH CHECK (robot = current_user)",
    "DROP POLICY IF EXISTS own_rows_out ON memories",
    f"CREATE POLICY own_rows_out ON memories FOR DELETE TO {ROBOTS_ROLE}"
    " USING (robot = current_user)",
    "DROP POLICY IF EXISTS shared_rows ON memories",
    f"CREATE POLICY shared_rows ON memories FOR SELECT TO {ROBOTS_ROLE} USING (robot = current_user"
    " OR cardinality(audience) = 0 OR current_user = ANY (audience))",
    f"GRANT SELECT, INSERT, DELETE ON memories TO {ROBOTS_ROLE}",
    f"GRANT USAGE ON SEQUENCE memories_seq_seq TO {ROBOTS_ROLE}",
    f"GRANT SELECT ON brainmem_meta TO {ROBOTS_ROLE}",
]
_PULL = (
    "SELECT xid::text AS xid, seq, robot, change, op, entry_id, agent_id, model, dim, record,"
    " embedding FROM memories WHERE (xid, seq) > (%s::xid8, %s)"
    " AND xid < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY xid, seq LIMIT %s")


def create_schema(conn) -> None:
    """Create (or bring up to date) the fleet's tables, roles and policies; as the administrator."""
    with conn.transaction():
        for sql in _SCHEMA:
            conn.execute(sql)
        conn.execute("INSERT INTO brainmem_meta VALUES ('schema_version', %s) ON CONFLICT (key)"
                     " DO UPDATE SET value = EXCLUDED.value", (SCHEMA_VERSION, ))


def add_robot(conn, name: str, password: str) -> None:
    """Create a robot's login role (or give it a new password); as the administrator."""
    from psycopg import sql

    with conn.transaction():
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name, )).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(name), sql.Literal(password)))
        conn.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(ROBOTS_ROLE), sql.Identifier(name)))


class FleetServer:
    """One robot's connection to the server: push its changes, pull the others'."""

    def __init__(self, dsn: str, timeout_s: float = 5.0):
        self.dsn = dsn
        self.timeout_s = timeout_s
        self.conn = None
        self.robot = ""

    def connect(self) -> None:
        """Connect and check the server speaks this robot's schema; StoreUnavailable if not."""
        import psycopg
        from psycopg.rows import dict_row

        try:
            self.conn = psycopg.connect(
                self.dsn, connect_timeout=max(1, math.ceil(self.timeout_s)), row_factory=dict_row,
                autocommit=True, options=f"-c statement_timeout={int(self.timeout_s * 1000)}")
            self.robot = self.conn.execute("SELECT current_user AS u").fetchone()["u"]
            row = self.conn.execute(
                "SELECT value FROM brainmem_meta WHERE key = 'schema_version'").fetchone()
        except psycopg.Error as exc:
            self.close()
            raise StoreUnavailable(f"fleet server: {str(exc).strip()}") from exc
        if row is None or row["value"] != SCHEMA_VERSION:
            found = row["value"] if row else "none"
            self.close()
            raise StoreUnavailable(f"fleet server speaks schema version {found}; this robot "
                                   f"speaks {SCHEMA_VERSION}: upgrade the one that is behind")

    def push(self, changes: Sequence[Change], model: str, dim: int,
             audience: Sequence[str]) -> None:
        """Insert the changes in one transaction; a change already there is left as it is."""
        rows = [(c.seq, c.op, c.entry_id, c.agent_id, model, dim, json.dumps(c.record),
                 c.embedding, list(audience)) for c in changes]
        with self._unavailable_on_error(), self.conn.transaction():
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memories (change, op, entry_id, agent_id, model, dim, record,"
                    " embedding, audience) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (robot, change) DO NOTHING", rows)
                gone = [(c.entry_id, ) for c in changes if c.op == "delete"]
                if gone:
                    cur.executemany("DELETE FROM memories WHERE robot = current_user AND"
                                    " entry_id = %s AND op = 'put'", gone)

    def pull(self, cursor: tuple[str, int], limit: int) -> list[dict]:
        with self._unavailable_on_error(), self.conn.transaction():
            return self.conn.execute(_PULL, (cursor[0], cursor[1], limit)).fetchall()

    @contextlib.contextmanager
    def _unavailable_on_error(self):
        """Turn the driver's errors into StoreUnavailable, and drop a connection that failed."""
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            self.close()
            raise StoreUnavailable(f"fleet server: {str(exc).strip()}") from exc

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a connection to a server that went away may not close cleanly
                pass

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed
