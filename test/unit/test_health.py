"""Health: the level and the reasons diagnostics publish, judged from what the core sees."""
import pytest

from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.errors import StoreUnavailable
from brainmem_ros.core.trace import Entry, Zone
from brainmem_ros.core.health import BacklogHealth, Level, ScheduleHealth, StoreHealth, ago
from brainmem_ros.core.latency import LatencyWindow


class Ticks:
    """A monotonic clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def memory(tmp_path, hashing):
    from brainmem_ros.core.memory import BrainMemory

    with BrainMemory(MemoryConfig().replace(**{"store.path": str(tmp_path / "m.db")}),
                     embedder=hashing, clock=lambda: 5000.0) as memory:
        yield memory


def test_a_serving_store_is_ok_and_says_what_it_holds(memory):
    memory.observe("robot_a", "the butter is in the fridge")
    memory.consolidate("robot_a")
    memory.observe("robot_a", "the cup is on the table")
    from brainmem_ros.core.retrieval import RetrievalRequest

    memory.retrieve(RetrievalRequest("robot_a", "where is the butter?"))
    memory.forget("robot_a")
    check = StoreHealth(MemoryConfig().health).check(memory, "active", "", now=5060.0)
    assert check.level == Level.OK, check.message
    assert check.values["long-term memories"] == "2"  # the episode and the fact drawn from it
    assert check.values["robot_a semantic"] == check.values["robot_a episodic"] == "1"
    assert check.values["working-memory traces"] == "1"
    assert check.values["retrievals in the last minute"] == "1"
    assert float(check.values["retrieval p99 ms"]) > 0
    assert check.values["last consolidation"].startswith("1 min ago: promoted 1")
    assert check.values["last forgetting"].startswith("1 min ago")
    assert "2 of 2 memories" in check.values["vector index"]


def test_a_clock_started_over_on_a_store_with_later_memories_warns_until_it_passes_them(
        tmp_path, hashing):
    from brainmem_ros.core.memory import BrainMemory

    clock = Ticks()
    clock.now = 5000.0  # the first run of a simulation
    config = MemoryConfig().replace(**{"store.path": str(tmp_path / "m.db")})
    with BrainMemory(config, embedder=hashing, clock=clock) as memory:
        memory.observe("robot", "the butter is in the fridge")
        memory.consolidate("robot")
    clock.now = 10.0  # the simulation started again on the same store
    with BrainMemory(config, embedder=hashing, clock=clock) as memory:
        health = StoreHealth(config.health)
        check = health.check(memory, "active", "", now=clock.now)
        assert check.level == Level.WARN and "after the clock's time" in check.message
        memory.observe("robot", "the butter is on the counter")
        memory.consolidate("robot")
        assert memory.store.current_facts("robot", ["butter"])[("butter", "location")][0] == \
            "fridge"  # why it warns: the later observation is history on arrival
        ok = health.check(memory, "active", "", now=5000.0 + config.encoding.max_future_s)
        assert "clock" not in ok.message and ok.level == Level.OK, ok.message


def test_not_active_warns_and_a_failed_transition_is_an_error_with_its_reason(memory):
    health = StoreHealth(MemoryConfig().health)
    inactive = health.check(memory, "inactive", "", now=None)
    assert inactive.level == Level.WARN and "inactive: not serving" in inactive.message
    failed = health.check(None, "unconfigured", "configure failed: model files are missing", None)
    assert failed.level == Level.ERROR
    assert failed.message.startswith("configure failed: model files are missing")


def test_a_read_only_or_full_disk_and_a_failed_write_are_errors(memory, monkeypatch):
    health = StoreHealth(MemoryConfig().health)
    real = memory.store.disk()
    monkeypatch.setattr(memory.store, "disk", lambda: {**real, "read_only": True})
    assert "file system is read-only" in health.check(memory, "active", "", None).message
    monkeypatch.setattr(memory.store, "disk", lambda: {**real, "free": 50 * 1024 * 1024})
    full = health.check(memory, "active", "", None)
    assert full.level == Level.ERROR and "disk nearly full: 50 MB free" in full.message
    monkeypatch.setattr(memory.store, "disk", lambda: {**real, "free": 500 * 1024 * 1024})
    filling = health.check(memory, "active", "", None)
    assert filling.level == Level.WARN and "disk filling up" in filling.message
    monkeypatch.setattr(memory.store, "disk", lambda: real)
    memory.store._db.conn.execute("PRAGMA query_only = 1")  # writes fail from here on
    with pytest.raises(StoreUnavailable):
        memory.store_entries([Entry("r", Zone.SEMANTIC, "the cup is on the table", None)])
    assert "last write failed" in health.check(memory, "active", "", None).message
    memory.store._db.conn.execute("PRAGMA query_only = 0")  # repaired: health finds out itself
    assert health.check(memory, "active", "", None).level == Level.OK


def test_an_index_missing_rows_is_an_error_only_when_seen_twice(memory, monkeypatch):
    health = StoreHealth(MemoryConfig().health)
    monkeypatch.setattr(memory.store, "index_health",
                        lambda: {"rows": 10, "indexed": 9, "queued": 0})
    assert health.check(memory, "active", "", None).level == Level.OK  # a write in flight
    again = health.check(memory, "active", "", None)
    assert again.level == Level.ERROR and "holds 9 of 10 memories" in again.message


def test_counts_are_read_again_after_a_change_at_most_every_few_seconds(memory):
    ticks = Ticks()
    health = StoreHealth(MemoryConfig().health, monotonic=ticks)
    assert health.check(memory, "active", "", None).values["long-term memories"] == "0"
    memory.observe("r", "the butter is in the fridge")
    memory.consolidate("r")
    ticks.now += 1.0
    assert health.check(memory, "active", "", None).values["long-term memories"] == "0"
    ticks.now += 5.0
    assert health.check(memory, "active", "", None).values["long-term memories"] == "2"


def test_a_backlog_warns_while_it_grows_and_dropped_events_are_an_error():
    ticks = Ticks()
    settings = MemoryConfig().replace(**{"health.backlog_warn": 100}).health
    backlog = BacklogHealth(settings, monotonic=ticks)
    assert backlog.check(0, None, True, 10, 0).level == Level.OK
    ticks.now += 1
    growing = backlog.check(150, 6.0, False, 10, 0)
    assert growing.level == Level.WARN and "backlog growing: 150 events waiting" in growing.message
    assert "not reachable" in growing.message
    backlog.dropped(3)
    dropped = backlog.check(150, 7.0, True, 10, 0)
    assert dropped.level == Level.ERROR and dropped.message.startswith("3 events dropped")
    ticks.now += 61
    assert backlog.check(0, None, True, 160, 0).level == Level.OK


def test_a_refused_pass_warns_until_one_succeeds():
    schedule = ScheduleHealth()
    schedule.record("consolidation", 100.0, False, "store_node is inactive")
    assert schedule.check(130.0).level == Level.WARN
    schedule.record("consolidation", 140.0, True)
    check = schedule.check(150.0)
    assert check.level == Level.OK and check.values["last consolidation"] == "10 s ago: done"


def test_the_latency_window_keeps_the_last_minute_only():
    ticks = Ticks()
    window = LatencyWindow(span_s=60.0, clock=ticks)
    window.add(0.5)
    ticks.now += 30
    window.add(0.1)
    assert window.recent() == [0.5, 0.1]
    ticks.now += 31
    assert window.recent() == [0.1]


@pytest.mark.parametrize("seconds, said", [(3, "3 s"), (125, "2 min"), (7200, "2 h"),
                                           (3 * 86400, "3 d"), (-5, "just now")])
def test_ages_read_at_a_glance(seconds, said):
    assert ago(seconds) == said
