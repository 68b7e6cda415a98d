"""Bad input, systematically, to every service, topic and bag reader.

Bad input, systematically: generated requests for every store_node service and generated messages
for the encoder's topics, plus damaged bag files for replay.

Each case must get a clear answer (``success`` with, when false, a message that is not an internal
error), leave the node serving, and leave the store unchanged when refused. The handlers are
store_node's own, called in this process (the DDS layer is covered by the integration tests); the
embedder is the deterministic test stand-in, since what is checked is validation, not meaning.
Together the properties below run well over 10,000 cases.
"""
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CASES = 1300  # per property; eight service properties plus two message ones: > 10,000 cases

TEXT = st.one_of(
    st.text(max_size=40),
    st.text(min_size=4001, max_size=4100),  # over encoding.max_text_chars
    st.sampled_from([
        "", " ", "\t\n", "robot", "butter", "where is the butter?", "'; DROP TABLE entries; --",
        "robot\x00b", "\x1b[31m", "💥" * 20, "SELECT * FROM journal", "a" * 300, "../../etc/passwd"
    ]),
)
AGENT = st.one_of(st.sampled_from(["robot", "other", "", " ", "robot\x00", "*", "a" * 300]),
                  st.text(max_size=12))
FLOAT = st.floats(width=32, allow_nan=True, allow_infinity=True)
F64 = st.floats(allow_nan=True, allow_infinity=True)
INT32 = st.integers(-2**31, 2**31 - 1)
UINT8 = st.integers(0, 255)
ZONES = st.lists(
    st.sampled_from(
        ["episodic", "semantic", "procedural", "goal", "working", "moon", "", "EPISODIC"]),
    max_size=3)
ZONE = st.sampled_from(["episodic", "semantic", "procedural", "goal", "working", "moon", ""])
EMBEDDING = st.one_of(
    st.just([]), st.just([0.05] * 384), st.just([math.nan] * 384),
    st.just([math.inf] + [0.0] * 383),
    st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), max_size=400))
IDS = st.lists(st.one_of(st.text(max_size=20), st.sampled_from(["epi-x", "", "%", "' OR 1=1 --"])),
               max_size=4)


@pytest.fixture(scope="module")
def store_node(tmp_path_factory):
    import rclpy
    from rclpy.parameter import Parameter

    from brainmem_ros.core.embedding import HashingEmbedder
    from brainmem_ros.nodes.store_node import StoreNode

    folder = tmp_path_factory.mktemp("props")
    context = rclpy.Context()
    rclpy.init(context=context)
    node = StoreNode(embedder=HashingEmbedder(), context=context,
                     parameter_overrides=[Parameter("store.path", value=str(folder / "memory.db"))])
    seed = node.memory
    seed.push_goal("robot", "make a sandwich", goal_id="g-main")
    seed.observe("robot", "the butter is in the fridge")
    yield node
    node.close()
    node.destroy_node()
    rclpy.shutdown(context=context)


def _state(node):
    store = node.memory.store
    return len(store), len(store.journal()), store.archive_count(), \
        [g.id for wm in node.memory.working.agents.values() for g in wm.stack]


def _answer(node, handler, request, response):
    before = _state(node)
    response = node._guard(handler)(request, response)
    assert isinstance(response.success, bool)
    if not response.success:
        assert response.message and not response.message.startswith(
            "internal error"), response.message
        assert _state(node) == before, "a refused request changed the store"
    return response


def _fits(msg_factory):
    """Build a message; values a ROS message cannot hold at all are refused by rclpy itself."""
    try:
        return msg_factory()
    except (AssertionError, TypeError, ValueError):
        return None


PROPS = settings(
    max_examples=CASES, deadline=None, derandomize=True, suppress_health_check=[
        HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large
    ])


@PROPS
@given(agent=AGENT, query=TEXT, context=TEXT, zones=ZONES, top_k=INT32, min_score=FLOAT,
       working=st.booleans(), superseded=st.booleans(), since=F64, until=F64,
       has_position=st.booleans(), x=F64, radius=FLOAT)
def test_retrieve(store_node, agent, query, context, zones, top_k, min_score, working, superseded,
                  since, until, has_position, x, radius):
    from geometry_msgs.msg import Point

    from brainmem_ros.srv import RetrieveMemory

    request = _fits(lambda: RetrieveMemory.Request(
        agent_id=agent, query=query, context=context, zones=zones, top_k=top_k, min_score=min_score,
        exclude_working=not working, include_superseded=superseded, since=since, until=until,
        position=Point(x=x, y=0.0, z=0.0), has_position=has_position, radius=radius))
    if request is not None:
        _answer(store_node, store_node.on_retrieve, request, RetrieveMemory.Response())


@PROPS
@given(entries=st.lists(st.tuples(AGENT, ZONE, TEXT, EMBEDDING, FLOAT, FLOAT, st.booleans()),
                        max_size=3))
def test_store(store_node, entries):
    from brainmem_ros.msg import MemoryEntry
    from brainmem_ros.srv import StoreMemory

    request = _fits(lambda: StoreMemory.Request(entries=[
        MemoryEntry(agent_id=a, zone=z, content=c, embedding=e, importance=i, confidence=f, shared=s
                    ) for a, z, c, e, i, f, s in entries
    ]))
    if request is not None:
        _answer(store_node, store_node.on_store, request, StoreMemory.Response())


@PROPS
@given(traces=st.lists(st.tuples(AGENT, UINT8, TEXT, EMBEDDING, FLOAT, st.booleans(), TEXT),
                       max_size=3))
def test_ingest(store_node, traces):
    from brainmem_ros.msg import Trace
    from brainmem_ros.srv import IngestTraces

    request = _fits(lambda: IngestTraces.Request(traces=[
        Trace(agent_id=a, kind=k, text=t, embedding=e, confidence=c, has_success=s, success=s,
              action=act) for a, k, t, e, c, s, act in traces
    ]))
    if request is not None:
        _answer(store_node, store_node.on_ingest, request, IngestTraces.Response())


@PROPS
@given(agent=AGENT, reason=TEXT, goal_id=st.one_of(st.just(""), st.just("g-main"),
                                                   st.text(max_size=20)))
def test_consolidate(store_node, agent, reason, goal_id):
    from brainmem_ros.srv import Consolidate

    _answer(store_node, store_node.on_consolidate,
            Consolidate.Request(agent_id=agent, reason=reason, goal_id=goal_id),
            Consolidate.Response())


@PROPS
@given(agent=AGENT, ids=IDS, entities=IDS)
def test_forget(store_node, agent, ids, entities):
    from brainmem_ros.srv import Forget

    # decay is left off: a decay pass legitimately archives what has faded
    _answer(store_node, store_node.on_forget,
            Forget.Request(agent_id=agent, decay=False, ids=ids, entities=entities),
            Forget.Response())


@PROPS
@given(op=UINT8, agent=AGENT, goal_id=st.one_of(st.just(""), st.just("g-main"),
                                                st.text(max_size=20)), description=TEXT,
       temporary=st.booleans(), status=UINT8)
def test_update_goal(store_node, op, agent, goal_id, description, temporary, status):
    from brainmem_ros.msg import Goal
    from brainmem_ros.srv import UpdateGoal

    request = UpdateGoal.Request
    finishing = (request.OP_COMPLETE, request.OP_FAIL, request.OP_POP)
    if op in finishing and agent == "robot" and goal_id in ("", "g-main"):
        return  # finishing the seeded main goal is a valid request; the other properties rely on it
    request = UpdateGoal.Request(
        operation=op, goal=Goal(agent_id=agent, id=goal_id, description=description,
                                temporary=temporary, status=status))
    response = _answer(store_node, store_node.on_update_goal, request, UpdateGoal.Response())
    if response.success and op == UpdateGoal.Request.OP_PUSH:  # keep the stack from filling up
        store_node.memory.finish_goal(agent, response.goal.id, None)


@PROPS
@given(agent=AGENT, max_traces=st.integers(0, 2**32 - 1))
def test_get_working_memory(store_node, agent, max_traces):
    from brainmem_ros.srv import GetWorkingMemory

    _answer(store_node, store_node.on_get_working,
            GetWorkingMemory.Request(agent_id=agent, max_traces=max_traces),
            GetWorkingMemory.Response())


def test_get_working_memory_returns_the_newest_traces_first_up_to_max_traces(store_node):
    from brainmem_ros.srv import GetWorkingMemory

    for i in range(3):
        store_node.memory.observe("reader", f"note {i}: the cup is on the shelf")

    def ask(n):
        answer = _answer(store_node, store_node.on_get_working,
                         GetWorkingMemory.Request(agent_id="reader", max_traces=n),
                         GetWorkingMemory.Response())
        return [t.content[:6] for t in answer.traces]

    assert ask(2) == ["note 2", "note 1"]
    assert ask(0) == ask(100) == ["note 2", "note 1", "note 0"]


@PROPS
@given(agent=AGENT, goal_id=st.one_of(st.just(""), st.text(max_size=20)), action=TEXT,
       success=st.booleans(), detail=TEXT, entities=IDS)
def test_report_outcome(store_node, agent, goal_id, action, success, detail, entities):
    from brainmem_ros.srv import ReportOutcome

    _answer(
        store_node, store_node.on_report_outcome,
        ReportOutcome.Request(agent_id=agent, goal_id=goal_id, action=action, success=success,
                              detail=detail, entities=entities), ReportOutcome.Response())


@PROPS
@given(agent=AGENT, text=TEXT, confidence=FLOAT, source=TEXT, has_position=st.booleans(), x=F64)
def test_observation_messages(store_node, agent, text, confidence, source, has_position, x):
    """Check what encoder_node does with generated Observations.

    What encoder_node does with an Observation: convert, then encode; refusals are BrainMemError.
    """
    from geometry_msgs.msg import Point

    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.msg import Observation
    from brainmem_ros.nodes.conversions import observation_event

    msg = _fits(lambda: Observation(agent_id=agent, text=text, confidence=confidence, source=source,
                                    position=Point(x=x, y=0.0, z=0.0), has_position=has_position))
    if msg is None:
        return
    before = _state(store_node)
    try:
        store_node.memory.encode([observation_event(msg)])
    except BrainMemError as exc:
        assert str(exc)
        assert _state(store_node) == before


@PROPS
@given(agent=AGENT, action=TEXT, result=TEXT, success=st.booleans(), goal_id=TEXT)
def test_action_result_messages(store_node, agent, action, result, success, goal_id):
    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.msg import ActionResult
    from brainmem_ros.nodes.conversions import action_event

    msg = ActionResult(agent_id=agent, action=action, result=result, success=success,
                       goal_id=goal_id)
    before = _state(store_node)
    try:
        store_node.memory.encode([action_event(msg)])
    except BrainMemError as exc:
        assert str(exc)
        assert _state(store_node) == before


def test_the_node_still_serves_after_everything(store_node):
    from brainmem_ros.srv import RetrieveMemory

    r = store_node._guard(store_node.on_retrieve)(RetrieveMemory.Request(
        agent_id="robot", query="where is the butter?", top_k=3),
                                                  RetrieveMemory.Response())
    assert r.success and r.memories
    assert store_node.memory.store.integrity()["integrity_ok"]


def test_damaged_bags_are_refused_clearly(repo_root, tmp_path):
    """Damaged bags are refused clearly or replayed as far as they read.

    Truncations and byte flips of the shipped bag, 200 of them: a BagError, or a replay of whatever
    is still readable; never another exception.
    """
    import shutil

    from brainmem_ros.replay.bag import BagError, read_bag

    source = repo_root / "bags" / "kitchen_run"
    rng = random.Random(3)
    for case in range(200):
        bag = tmp_path / f"bag{case}"
        shutil.copytree(source, bag)
        files = sorted(p for p in bag.iterdir() if p.is_file())
        target = rng.choice(files)
        data = bytearray(target.read_bytes())
        if case % 3 == 0:
            data = data[:rng.randrange(len(data) + 1)]
        else:
            for _ in range(rng.randint(1, 20)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        target.write_bytes(bytes(data))
        try:
            list(read_bag(bag))
        except BagError as exc:
            assert str(exc)
        shutil.rmtree(bag)
