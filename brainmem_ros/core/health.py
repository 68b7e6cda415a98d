"""Is the memory healthy? A level, the reasons and the figures, for ``/diagnostics``.

Each check gives a level (OK, WARN, ERROR: the values of ``diagnostic_msgs/DiagnosticStatus``), one
message that says why, and key-value figures. The nodes publish them about once a second; nothing
here knows ROS, so the judgement is tested in milliseconds. Thresholds are the ``health.*``
parameters.
"""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Callable, Optional

from brainmem_ros.core.config import HealthSection
from brainmem_ros.core.latency import percentile

__all__ = ["Level", "Check", "StoreHealth", "BacklogHealth", "ScheduleHealth", "ago"]

MB = 1024 * 1024
# Counting memories per agent and zone reads an index of the whole store: done again only after a
# change, and at most this often.
COUNT_EVERY_S = 5.0
# Most per-agent count lines one status carries; a fleet's store would otherwise fill the message.
MAX_COUNT_LINES = 40


class Level(IntEnum):
    OK = 0
    WARN = 1
    ERROR = 2


@dataclass
class Check:
    name: str
    level: Level = Level.OK
    message: str = "ok"
    values: dict[str, str] = field(default_factory=dict)
    reasons: list[tuple[int, str]] = field(default_factory=list)

    def flag(self, level: Level, reason: str) -> None:
        """Raise the level to at least ``level``; the message lists every reason, worst first."""
        self.level = max(self.level, level)
        self.reasons.append((int(level), reason))
        self.reasons.sort(key=lambda r: -r[0])
        self.message = "; ".join(text for _, text in self.reasons)


def ago(seconds: float) -> str:
    """Say how long ago, the way a person reads it at a glance: ``12 s``, ``5 min``, ``3 h``."""
    if not math.isfinite(seconds) or seconds < 0:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _summary(report: dict) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in report.items())


class StoreHealth:
    """The memory store's check: serving state, disk, writes, vector index, counts, latency."""

    def __init__(self, settings: HealthSection, monotonic: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._monotonic = monotonic
        self._counts: dict[str, dict[str, int]] = {}
        self._counted_revision = -1
        self._counted_at = -math.inf
        self._index_mismatch = False

    def check(self, memory, state: str, failure: str, now: Optional[float]) -> Check:
        """Judge ``memory`` (None when not configured) in lifecycle ``state``.

        ``failure`` is why the last transition failed, ``now`` the robot's time (None before it
        starts) for the ages of the last passes.
        """
        check = Check("memory store")
        check.values["state"] = state
        if failure:
            check.flag(Level.ERROR, failure)
        if state != "active":
            check.flag(Level.WARN, f"{state}: not serving requests")
        if memory is None:
            return check
        store = memory.store
        self._disk(check, store)
        self._index(check, store)
        self._count(check, memory)
        self._clock_behind(check, memory, now)
        recent = memory.retrieval_latency.recent()
        check.values["retrievals in the last minute"] = str(len(recent))
        if recent:
            check.values["retrieval p50 ms"] = f"{percentile(recent, 50) * 1000:.1f}"
            check.values["retrieval p99 ms"] = f"{percentile(recent, 99) * 1000:.1f}"
        for name, (stamp, report) in sorted(memory.passes.items()):
            when = f"{ago(now - stamp)} ago" if now is not None else "earlier"
            check.values[f"last {name}"] = f"{when}: {_summary(report)}"
        if check.level == Level.OK:
            check.message = f"serving {check.values['long-term memories']} long-term memories"
        return check

    def _disk(self, check: Check, store) -> None:
        disk = store.disk()
        check.values["store file"] = str(store.path)
        check.values["store MB"] = f"{disk['bytes'] / MB:.1f}"
        check.values["free disk MB"] = f"{disk['free'] / MB:.0f}"
        if disk["read_only"]:
            check.flag(Level.ERROR, "the store cannot be written: its file system is read-only")
        elif not disk["writable"]:
            check.flag(Level.ERROR, f"the store cannot be written: {store.path} or its folder "
                       "is not writable (permissions, or an immutable file)")
        if store.write_error and disk["writable"] and not disk["read_only"]:
            store.probe_write()  # the disk may have been repaired since: find out, cheaply
        if store.write_error:
            check.flag(Level.ERROR, f"last write failed: {store.write_error}")
        free_mb = disk["free"] / MB
        if free_mb < self.settings.free_disk_error_mb:
            check.flag(Level.ERROR, f"disk nearly full: {free_mb:.0f} MB free beside the store")
        elif free_mb < self.settings.free_disk_warn_mb:
            check.flag(Level.WARN, f"disk filling up: {free_mb:.0f} MB free beside the store")

    def _index(self, check: Check, store) -> None:
        index = store.index_health()
        check.values["vector index"] = (f"{index['indexed']} of {index['rows']} memories, "
                                        f"{index['queued']} waiting for their graph")
        # A write is between its commit and its vectors for an instant: only a difference seen on
        # two ticks running is a damaged index.
        mismatch = index["indexed"] != index["rows"]
        if mismatch and self._index_mismatch:
            check.flag(Level.ERROR, f"the vector index holds {index['indexed']} of "
                       f"{index['rows']} memories: restart the node to rebuild it")
        self._index_mismatch = mismatch

    @staticmethod
    def _clock_behind(check: Check, memory, now: Optional[float]) -> None:
        """Warn while the store holds memories stamped well after the clock's time.

        A simulator restarted on the same store, or a recorded run replayed into it again, starts
        the clock over: what is seen now is older than what was seen before, so it supersedes none
        of those facts (a late fact is history, ``store/supersession.py``) until the clock passes
        them. Beyond ``encoding.max_future_s``, the lead a new stamp may have over the clock.
        """
        newest = memory.store.newest_stamp()
        if now is None or newest is None or newest - now <= memory.config.encoding.max_future_s:
            return
        check.flag(Level.WARN, f"the store holds memories stamped {ago(newest - now)} after the "
                   "clock's time (a restarted simulation or a replayed run?): what is seen now "
                   "supersedes none of their facts until the clock passes them; give a new run "
                   "its own store")

    def _count(self, check: Check, memory) -> None:
        tick = self._monotonic()
        if memory.revision != self._counted_revision and tick - self._counted_at >= COUNT_EVERY_S:
            self._counts = memory.store.counts()
            self._counted_revision, self._counted_at = memory.revision, tick
        total = sum(n for zones in self._counts.values() for n in zones.values())
        check.values["long-term memories"] = str(total)
        lines = [(f"{agent} {zone}", str(n)) for agent, zones in sorted(self._counts.items())
                 for zone, n in sorted(zones.items())]
        check.values.update(lines[:MAX_COUNT_LINES])
        if len(lines) > MAX_COUNT_LINES:
            check.values["more agent and zone counts"] = str(len(lines) - MAX_COUNT_LINES)
        check.values["working-memory traces"] = str(
            sum(len(wm.traces) for wm in list(memory.working.agents.values())))


class BacklogHealth:
    """encoder_node's check: what waits to be stored, for how long, and what was dropped."""

    GROWTH_WINDOW_S = 5.0  # a backlog larger than this long ago is growing
    DROP_WINDOW_S = 60.0  # events dropped this recently keep the level at ERROR

    def __init__(self, settings: HealthSection, monotonic: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._monotonic = monotonic
        self._sizes: deque[tuple[float, int]] = deque()
        self._drops: deque[tuple[float, int]] = deque()

    def dropped(self, n: int = 1) -> None:
        self._drops.append((self._monotonic(), n))

    def check(self, queued: int, oldest_age_s: Optional[float], store_reachable: bool,
              ingested: int, rejected: int) -> Check:
        tick = self._monotonic()
        self._sizes.append((tick, queued))
        while self._sizes and self._sizes[0][0] < tick - self.GROWTH_WINDOW_S:
            self._sizes.popleft()
        while self._drops and self._drops[0][0] < tick - self.DROP_WINDOW_S:
            self._drops.popleft()
        check = Check("encoder")
        check.values.update({
            "events waiting": str(queued), "traces stored": str(ingested),
            "events refused": str(rejected),
            "oldest waiting event s": f"{oldest_age_s:.1f}" if oldest_age_s is not None else "-"
        })
        growing = queued > self._sizes[0][1]
        late = oldest_age_s is not None and oldest_age_s >= self.settings.lag_warn_s
        if queued >= self.settings.backlog_warn or late:
            trend = "growing" if growing else "not shrinking"
            check.flag(Level.WARN, f"backlog {trend}: {queued} events waiting, the oldest "
                       f"{oldest_age_s or 0.0:.1f} s")
        if queued and not store_reachable:
            check.flag(Level.WARN, "store_node is not reachable: events wait for it")
        dropped = sum(n for _, n in self._drops)
        if dropped:
            check.flag(Level.ERROR, f"{dropped} events dropped in the last minute: the queue "
                       "was full")
        return check


class ScheduleHealth:
    """consolidation_node's check: when each pass was last asked for and what the store said."""

    def __init__(self):
        self.last: dict[str, tuple[float, bool, str]] = {}  # pass -> (robot time, ok, message)

    def record(self, name: str, stamp: float, ok: bool, message: str = "") -> None:
        self.last[name] = (stamp, ok, message)

    def check(self, now: Optional[float]) -> Check:
        check = Check("schedule")
        for name, (stamp, ok, message) in sorted(self.last.items()):
            when = f"{ago(now - stamp)} ago" if now is not None else "earlier"
            check.values[f"last {name}"] = f"{when}: {'done' if ok else message}"
            if not ok:
                check.flag(Level.WARN, f"{name}: {message}")
        return check
