"""Keeping one robot's store in step with its fleet: push what it shares, pull what others share.

A thread does a round every ``fleet.period_s``: push the outbox in batches (each committed on the
server before it leaves the outbox, so a robot killed mid-push only sends it again, and the server
ignores a change it already has), then pull the others' changes from the cursor on and apply them
(``apply``). The robot never waits for the server: memories are stored and answered locally, and
a server that is down, slow or restarted only makes the outbox wait; the round retries.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Optional

from brainmem_ros.core.config import FleetSection
from brainmem_ros.core.errors import BrainMemError, StoreUnavailable
from brainmem_ros.core.fleet.apply import apply
from brainmem_ros.core.fleet.record import check_row
from brainmem_ros.core.fleet.server import FleetServer
from brainmem_ros.core.health import Check, Level
from brainmem_ros.core.latency import percentile

__all__ = ["FleetSync"]

log = logging.getLogger("brainmem_ros.fleet")
RETRY_MAX_S = 10.0  # the longest wait between two tries at an unreachable server


class FleetSync:

    def __init__(self, store, settings: FleetSection, model: str, dim: int, clock,
                 functional_predicates, max_future_s: float):
        self.store = store
        self.settings = settings
        self.model, self.dim = model, dim
        self.clock = clock
        self.functional_predicates = tuple(functional_predicates)
        self.max_future_s = max_future_s
        self.server = FleetServer(settings.dsn, settings.timeout_s)
        self.counts = {"pushed": 0, "pulled": 0, "stored": 0, "merged": 0, "deleted": 0,
                       "refused": 0}
        self.lags: deque[float] = deque(maxlen=1000)  # made there -> stored here, seconds
        self.refusals: deque[tuple[float, str]] = deque(maxlen=100)  # (steady time, reason)
        self.error: Optional[str] = None  # why the last round failed; None after one succeeded
        self.fatal = False  # the server speaks another schema: no round can succeed
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._round = threading.Lock()  # one round at a time (the thread's, or a caller's)
        self._thread: Optional[threading.Thread] = None

    # -- the thread --------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fleet", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread after one last push (bounded), and close the connection."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s + self.settings.timeout_s)
        self.server.close()

    def _run(self) -> None:
        wait = self.settings.period_s
        while True:
            self._wake.wait(wait)
            self._wake.clear()
            stopping = self._stop.is_set()
            try:
                self.round(pull=not stopping)
                wait = self.settings.period_s
            except Exception:  # said by round(); tried again, less and less often
                wait = min(RETRY_MAX_S, max(wait * 2, self.settings.period_s))
            if stopping:
                return

    def _failed(self, reason: str) -> None:
        if reason != self.error:
            log.warning("fleet: %s; memories wait in the outbox", reason)
        self.error = reason
        self.fatal = "schema version" in reason
        self.server.close()

    # -- one round ---------------------------------------------------------------------------------
    def round(self, pull: bool = True) -> tuple[int, int]:
        """Push everything queued, then pull what is there; (pushed, pulled) changes."""
        with self._round:
            for attempt in (1, 2):
                fresh = not self.server.connected
                try:
                    if fresh:
                        self.server.connect()
                    pushed = self.push()
                    pulled = self.pull() if pull else 0
                    break
                except (StoreUnavailable, OSError) as exc:
                    if not fresh and attempt == 1:
                        continue  # a connection that worked went away (a restart): once anew
                    self._failed(str(exc))
                    raise
                except Exception as exc:  # a defect must not stop the rounds; said, and retried
                    self._failed(f"{type(exc).__name__}: {str(exc).strip()}")
                    raise
            self.error, self.fatal = None, False
            return pushed, pulled

    def push(self) -> int:
        total = 0
        outbox = self.store.outbox
        while True:
            changes = outbox.take(self.settings.batch)
            if not changes:
                return total
            self.server.push(changes, self.model, self.dim, self.settings.share_with)
            outbox.done([c.seq for c in changes])
            total += len(changes)
            self.counts["pushed"] += len(changes)

    def pull(self) -> int:
        total = 0
        while True:
            rows = self.server.pull(self.store.outbox.cursor(), self.settings.batch)
            if not rows:
                return total
            now = self.clock()
            pulled, refused = [], []
            for row in rows:
                try:
                    pulled.append(check_row(row, self.model, self.dim, now, self.max_future_s))
                except (BrainMemError, KeyError, TypeError, ValueError) as exc:
                    change = f"{row.get('robot')}:{row.get('change')}"
                    refused.append(((str(row["xid"]), int(row["seq"])), change))
                    self._refused(f"refused change {change} ({row.get('op')} "
                                  f"{row.get('entry_id')!r}): {exc}")
            done = apply(self.store, pulled, refused, self.server.robot,
                         self.functional_predicates, self._refused)
            for key, n in done.items():
                self.counts[key] += n
            self.counts["pulled"] += len(rows)
            made = time.time()
            self.lags.extend(made - p.entry.created for p in pulled
                             if p.entry is not None and p.robot != self.server.robot)
            total += len(rows)
            if len(rows) < self.settings.batch:
                return total

    def _refused(self, reason: str) -> None:
        self.counts["refused"] += 1
        self.refusals.append((time.monotonic(), reason))
        log.warning("fleet: %s", reason)

    # -- health ------------------------------------------------------------------------------------
    def check(self) -> Check:
        check = Check("fleet")
        check.values.update({
            "robot": self.server.robot or "(not connected yet)",
            "waiting to push": str(self.store.outbox.backlog()),
            **{k: str(v) for k, v in self.counts.items()}
        })
        lags = list(self.lags)
        if lags:
            check.values["sync lag p50 s"] = f"{percentile(lags, 50):.2f}"
            check.values["sync lag p99 s"] = f"{percentile(lags, 99):.2f}"
        if self.error:
            level = Level.ERROR if self.fatal else Level.WARN
            check.flag(level, f"{self.error}; memories are kept here and wait to be shared")
        recent = [r for t, r in self.refusals if t > time.monotonic() - 60.0]
        if recent:
            check.flag(Level.WARN, f"{len(recent)} changes from the server refused in the last "
                       f"minute, the last: {recent[-1]}")
        if check.level == Level.OK:
            check.message = f"in step with the fleet as {self.server.robot}"
        return check
