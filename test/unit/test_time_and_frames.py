"""The core on the robot's time and in the robot's frames.

Time comes from the clock the memory is given (a node's clock under ROS, simulated time included),
never from this machine's wall clock; positions are compared only within one frame.
"""
import pytest

from brainmem_ros.core.encoding import Event
from brainmem_ros.core.errors import InvalidRequest, TimeUnavailable
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import Entry, Position, TraceKind, Zone

YEAR = 365 * 86400.0


class SimClock:
    """A clock the test moves by hand, as /clock moves a simulated robot's time."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        if self.now is None:
            raise TimeUnavailable("no /clock yet")
        return self.now


@pytest.fixture
def sim_memory(tmp_path, hashing):
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.memory import BrainMemory

    clock = SimClock(1000.0)
    memory = BrainMemory(MemoryConfig().replace(**{"store.path": str(tmp_path / "m.db")}),
                         embedder=hashing, clock=clock)
    yield memory, clock
    memory.close()


def test_memories_carry_the_clocks_time_and_decay_only_as_it_moves(sim_memory):
    memory, clock = sim_memory
    [stored
     ] = memory.store_entries([Entry("r", Zone.SEMANTIC, "the butter is in the fridge", None)])
    assert memory.store.get([stored])[0].created == 1000.0
    assert memory.forget("r").archived == 0  # at the same simulated time nothing is old
    clock.now = 1000.0 + 3 * YEAR
    assert memory.forget("r").archived == 1
    assert memory.store.get([stored]) == []


def test_a_recorded_run_keeps_its_stamps_and_nothing_is_archived_for_being_old(sim_memory):
    memory, clock = sim_memory
    clock.now = 1.75e9  # a bag's time, as replay --clock publishes it
    trace = memory.observe("r", "the tomato is on the counter", timestamp=1.75e9 - 30)
    assert trace.timestamp == 1.75e9 - 30
    memory.consolidate("r")
    assert memory.forget("r").archived == 0
    assert any("tomato" in r.entry.content
               for r in memory.retrieve(RetrievalRequest("r", "where is the tomato?")).recalls)


def test_an_event_stamped_zero_gets_the_clocks_time(sim_memory):
    memory, _ = sim_memory
    assert memory.observe("r", "the knife is in the drawer").timestamp == 1000.0


def test_a_stamp_far_ahead_of_the_clock_is_refused_and_nothing_changes(sim_memory):
    memory, _ = sim_memory
    with pytest.raises(InvalidRequest, match="ahead of the clock"):
        memory.observe("r", "the mug is on the shelf", timestamp=1000.0 + 10 * 86400)
    with pytest.raises(InvalidRequest, match="ahead of the clock"):
        memory.store_entries(
            [Entry("r", Zone.SEMANTIC, "a fact from the future", None, created=5e9)])
    assert len(memory.store) == 0 and not memory.working_memory("r").traces


def test_no_time_yet_is_an_error_not_a_stamp_at_zero(sim_memory):
    memory, clock = sim_memory
    clock.now = None
    with pytest.raises(TimeUnavailable):
        memory.store_entries([Entry("r", Zone.SEMANTIC, "the jam is in the cupboard", None)])
    assert len(memory.store) == 0


def _two_frames(memory, long_term=False):
    """Remember the same point in two frames: a red mug in map, a blue bowl in odom."""
    here = Position(2.0, 3.0)
    things = (("a red mug on the table", "map"), ("a blue bowl on the table", "odom"))
    if long_term:
        memory.store_entries([
            Entry("r", Zone.EPISODIC, text, None, position=here, frame=frame)
            for text, frame in things
        ])
    else:
        memory.encode([
            Event("r", TraceKind.OBSERVATION, text, position=here, frame=frame)
            for text, frame in things
        ])
    return here


@pytest.mark.parametrize("long_term", [False, True])
def test_spatial_recall_never_returns_a_memory_from_another_frame(sim_memory, long_term):
    memory, _ = sim_memory
    here = _two_frames(memory, long_term)

    def spatial(frame):
        result = memory.retrieve(
            RetrievalRequest("r", "what is here?", position=here, radius=1.0, frame=frame,
                             top_k=10))
        return {r.entry.content for r in result.recalls if "spatial" in r.routes}

    assert spatial("map") == {"a red mug on the table"}
    assert spatial("") == {"a red mug on the table"}  # no frame: the store's fixed frame (map)
    assert spatial("odom") == {"a blue bowl on the table"}


def test_an_unknown_or_malformed_frame_is_refused(sim_memory):
    memory, _ = sim_memory
    here = _two_frames(memory)
    with pytest.raises(InvalidRequest, match="unknown frame 'base_link'"):
        memory.retrieve(
            RetrievalRequest("r", "what is here?", position=here, radius=1.0, frame="base_link"))
    with pytest.raises(InvalidRequest, match="not a frame name"):
        memory.retrieve(
            RetrievalRequest("r", "what is here?", position=here, radius=1.0, frame="my frame"))
    with pytest.raises(InvalidRequest, match="not a frame name"):
        memory.observe("r", "a cup", position=here, frame="/map with spaces")


@pytest.mark.parametrize("radius", [-1.0, 0.0, float("nan"), float("inf")])
def test_a_bad_radius_is_refused(sim_memory, radius):
    memory, _ = sim_memory
    with pytest.raises(InvalidRequest, match="radius"):
        memory.retrieve(
            RetrievalRequest("r", "what is here?", position=Position(1, 1), radius=radius))


def test_positions_keep_their_frame_through_consolidation_and_a_restart(tmp_path, hashing):
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.memory import BrainMemory

    config = MemoryConfig().replace(**{"store.path": str(tmp_path / "m.db")})
    with BrainMemory(config, embedder=hashing) as memory:
        memory.observe("r", "the red mug is on the table", position=Position(1, 2), frame="odom")
        memory.consolidate("r")
    with BrainMemory(config, embedder=hashing) as memory:
        frames = {e.frame for e in memory.store.get(memory.store.ids()) if e.position}
        assert frames == {"odom"}


def test_a_listed_frame_is_accepted_and_another_refused(tmp_path, hashing):
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.memory import BrainMemory

    config = MemoryConfig().replace(**{
        "store.path": str(tmp_path / "m.db"),
        "store.frames": ["odom"]
    })
    with BrainMemory(config, embedder=hashing) as memory:
        memory.observe("r", "a cup", position=Position(0, 0), frame="odom")
        with pytest.raises(InvalidRequest, match="unknown frame 'camera'"):
            memory.observe("r", "a plate", position=Position(0, 0), frame="camera")
