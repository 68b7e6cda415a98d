"""The store's SQLite file: one connection in WAL mode, one lock, all-or-nothing transactions.

An id is handed out only after its transaction committed, so what a caller was told is stored is on
disk (``synchronous=FULL`` survives a power cut, ``NORMAL`` a process crash). A file deleted under
a running store is written back from the open connection; a file replaced by another is refused.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Callable, Iterator, Optional

from brainmem_ros.core.errors import StoreUnavailable

__all__ = ["Database", "WAL_CHECKPOINT_PAGES"]

log = logging.getLogger("brainmem_ros.store")

# WAL pages before SQLite copies them back into the database file. The default (1,000 pages, 4 MB)
# is less than one commit of 1,000 entries, so every such commit also ran a checkpoint; pages that
# several commits touch are now written back once. The WAL may grow to about 40 MB between
# checkpoints; it is as durable as the database file.
WAL_CHECKPOINT_PAGES = 10000


class Database:
    """The connection, the lock every reader and writer of the store takes, and transactions.

    ``on_begin`` runs inside every write transaction right after BEGIN: buffered statistics (access
    counts) ride along with the next real write instead of costing a commit of their own.

    ``revision`` counts committed transactions, so a view of the store (the map markers) knows
    when to look again; ``write_error`` is why the last write failed, until one succeeds (health).
    """

    def __init__(self, path: Path, synchronous: str = "FULL"):
        self.path = path
        self.lock = threading.RLock()
        self.synchronous = "FULL" if synchronous == "FULL" else "NORMAL"
        self.conn: Optional[sqlite3.Connection] = None
        self.identity: Optional[tuple[int, int]] = None
        self.on_begin: Callable[[sqlite3.Connection], None] = lambda conn: None
        self.revision = 0
        self.write_error: Optional[str] = None
        self.counts_generation = False  # set once the schema (its meta table) exists

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = self._connect()
        self.identity = self._file_identity()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None,
                               timeout=10.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _file_identity(self) -> Optional[tuple[int, int]]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def ensure_file(self) -> None:
        """Before a write, check that the file is still the one that was opened.

        If the store file was deleted under the running store, what this connection still holds is
        written back to the path (nothing stored is lost) and the store carries on there; if it
        was replaced by another file, writing is refused rather than mixing two stores.
        """
        now = self._file_identity()
        if now == self.identity:
            return
        if now is not None:
            raise StoreUnavailable(
                f"{self.path} was replaced by another file while the store was open; "
                "refusing to write to it (restart the node to open the new file)")
        log.warning("%s was deleted while open; restoring it from the open connection", self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            restored = sqlite3.connect(str(self.path))
            self.conn.backup(restored)
            restored.close()
            old, self.conn = self.conn, self._connect()
            old.close()
            self.identity = self._file_identity()
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(
                f"{self.path} was deleted and could not be restored: {exc}") from exc

    @contextlib.contextmanager
    def transaction(self, check_references: bool = True) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; on any error ROLLBACK, so nothing half-written stays.

        ``check_references=False``: SQLite does not check this transaction's foreign keys, for a
        writer whose every reference is to an entry it inserts itself (each edge, relation and
        derivation row would otherwise look its entry up again).
        """
        with self.lock:
            try:
                self.ensure_file()
            except StoreUnavailable as exc:
                self.write_error = str(exc)
                raise
            if not check_references:  # a no-op inside a transaction: set before BEGIN, reset after
                self.conn.execute("PRAGMA foreign_keys=OFF")
            try:
                yield from self._transaction_body()
            finally:
                if not check_references:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("PRAGMA foreign_keys=ON")

    def _transaction_body(self) -> Iterator[sqlite3.Connection]:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self.write_error = f"cannot write to {self.path}: {exc}"
            raise StoreUnavailable(self.write_error) from exc
        try:
            self.on_begin(self.conn)
            if self.counts_generation:  # a RAM snapshot saved at another generation is stale
                self.conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                self.write_error = f"write to {self.path} failed, nothing was changed: {exc}"
                raise StoreUnavailable(self.write_error) from exc
            raise
        self.revision += 1
        self.write_error = None

    def read(self, sql: str, params=()) -> list:
        """All rows of one statement, under the store's lock."""
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
