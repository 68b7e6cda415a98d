"""Landmarks: what the robot remembers, one per thing, where the newest current memory put it."""
import pytest

from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.landmarks import Landmark, label, landmarks
from brainmem_ros.core.trace import Entry, Position, Zone


@pytest.fixture
def memory(tmp_path, hashing):
    from brainmem_ros.core.memory import BrainMemory

    now = [1000.0]
    with BrainMemory(MemoryConfig().replace(**{"store.path": str(tmp_path / "m.db")}),
                     embedder=hashing, clock=lambda: now[0]) as memory:
        yield memory, now


def test_a_thing_seen_is_placed_where_it_was_seen_and_moves_when_its_fact_is_superseded(memory):
    memory, now = memory
    memory.observe("r", "the butter is in the fridge", position=Position(1.0, 2.0))
    [mark] = landmarks(memory, 10)
    assert (mark.entity, mark.position, mark.frame, mark.recent) == ("butter", (1.0, 2.0, 0.0),
                                                                     "map", True)
    memory.consolidate("r")
    [stored] = landmarks(memory, 10)
    assert stored.position == (1.0, 2.0, 0.0) and not stored.recent
    now[0] += 60
    memory.store_entries([Entry("r", Zone.SEMANTIC, "the butter is on the counter", None,
                                position=Position(4.0, 0.5))])
    [moved] = landmarks(memory, 10)
    assert moved.position == (4.0, 0.5, 0.0) and "counter" in moved.text


def test_memories_without_a_position_are_not_on_the_map_and_the_newest_come_first(memory):
    memory, now = memory
    memory.observe("r", "the cup is on the table")
    for i, thing in enumerate(["apple", "banana", "carrot"]):
        now[0] += 1
        memory.observe("r", f"the {thing} is in the basket", position=Position(float(i), 0.0))
    found = landmarks(memory, 2)
    assert [m.entity for m in found] == ["carrot", "banana"]


def test_each_agent_has_its_own_landmarks(memory):
    memory, _ = memory
    memory.observe("a", "the knife is in the drawer", position=Position(1.0, 1.0))
    memory.observe("b", "the knife is in the sink", position=Position(5.0, 5.0))
    assert {(m.agent_id, m.position.x) for m in landmarks(memory, 10)} == {("a", 1.0), ("b", 5.0)}


def test_a_label_says_what_where_and_how_long_ago():
    mark = Landmark("r", "butter", Position(0, 0), "map", "the butter is in the fridge " * 5, 100.0)
    text = label(mark, 400.0, with_agent=True)
    assert text.startswith("butter: the butter is in the fridge")
    assert text.endswith("(5 min ago) [r]") and len(text) < 100
