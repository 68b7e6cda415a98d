"""brainmem_ros on a robot's ROS graph, over real DDS between processes.

Two robots' stacks side by side in their namespaces, simulated time from /clock, a recorded run
replayed on its own clock, what was seen a moment ago in every answer, and parameters as the ROS
tools see them.
"""
import math
import signal
import time
from pathlib import Path

import pytest

from processes import Child
from ros_client import Client

REPO = Path(__file__).resolve().parents[2]
YEAR_S = 365 * 86400
NO_TIMER = [
    "--ros-args", "-p", "consolidation.period_s:=86400.0", "-p", "forgetting.period_s:=86400.0"
]


def _bringup(store: Path, namespace: str, *args: str) -> Child:
    child = Child([
        "-m", "brainmem_ros.cli", "bringup", "--one-process", "--store",
        str(store), "--namespace", namespace, *args, *NO_TIMER
    ], cwd=REPO)
    child.wait_for_line(f"up in /{namespace}", timeout=120)
    return child


def _stop(child: Child) -> None:
    code = child.stop(signal.SIGINT, timeout=30)
    assert code == 0, child.output()


def _srv():
    import brainmem_ros.srv as s
    return s


def _msg():
    import brainmem_ros.msg as m
    return m


def _store_fact(client, namespace, agent, text):
    s, m = _srv(), _msg()
    return client.call(
        s.StoreMemory, f"/{namespace}/brainmem/store_memory",
        s.StoreMemory.Request(
            entries=[m.MemoryEntry(agent_id=agent, zone="semantic", content=text)]))


def _retrieve(client, namespace, agent, query, **fields):
    s = _srv()
    return client.call(s.RetrieveMemory, f"/{namespace}/retrieve_memory",
                       s.RetrieveMemory.Request(agent_id=agent, query=query, **fields))


def test_two_robots_side_by_side_each_answer_from_their_own_store(tmp_path):
    robots = {}
    try:
        for ns in ("robot1", "robot2"):
            robots[ns] = _bringup(tmp_path / f"{ns}.db", ns)
        client = Client()
        try:
            for ns, place in (("robot1", "fridge"), ("robot2", "counter")):
                assert _store_fact(client, ns, "robot", f"the butter is in the {place}").success
            for ns, place, other in (("robot1", "fridge", "counter"), ("robot2", "counter",
                                                                       "fridge")):
                answer = _retrieve(client, ns, "robot", "where is the butter?")
                texts = [m.content for m in answer.memories]
                assert answer.success and place in texts[0] and not any(other in t for t in texts)
            from brainmem_ros.srv import RetrieveMemory

            root = client.node.create_client(RetrieveMemory, "/retrieve_memory")
            assert not root.wait_for_service(
                timeout_sec=2.0), "something answers at /retrieve_memory"
            assert client.node.count_subscribers("/robot1/brainmem/observation") >= 1
            assert client.node.count_subscribers("/brainmem/observation") == 0
        finally:
            client.close()
    finally:
        for child in robots.values():
            _stop(child)


def _tick(client, seconds: float) -> None:
    """Publish /clock at ``seconds``, as a simulator or ros2 bag play --clock does."""
    from rosgraph_msgs.msg import Clock

    msg = Clock()
    msg.clock.sec, msg.clock.nanosec = int(seconds), int((seconds % 1) * 1e9)
    for _ in range(3):  # the nodes' time sources keep only the latest (depth 1, best effort)
        client.publish(Clock, "/clock", msg)


def test_on_sim_time_memories_carry_clock_time_and_decay_only_when_clock_moves(tmp_path):
    s = _srv()
    child = _bringup(tmp_path / "sim.db", "simbot", "--use-sim-time")
    client = Client()
    try:
        early = _store_fact(client, "simbot", "robot", "the jam is in the cupboard")
        assert not early.success and "/clock" in early.message
        _tick(client, 1000.0)
        stored = client.wait_until(lambda: (r := _store_fact(
            client, "simbot", "robot", "the butter is in the fridge")).success and r)
        answer = _retrieve(client, "simbot", "robot", "where is the butter?")
        [memory] = [m for m in answer.memories if m.id == stored.ids[0]]
        assert memory.created.sec == 1000
        forget = client.call(s.Forget, "/simbot/brainmem/forget", s.Forget.Request(decay=True))
        assert forget.success and forget.archived == 0
        assert any(m.id == stored.ids[0]
                   for m in _retrieve(client, "simbot", "robot", "where is the butter?").memories)
        _tick(client, 1000.0 + 3 * YEAR_S)

        def gone():
            client.call(s.Forget, "/simbot/brainmem/forget", s.Forget.Request(decay=True))
            memories = _retrieve(client, "simbot", "robot", "where is the butter?").memories
            return not any(m.id == stored.ids[0] for m in memories)

        assert client.wait_until(gone, timeout=20)
    finally:
        client.close()
        _stop(child)


def test_on_sim_time_the_schedule_starts_with_the_clock_not_at_its_first_message():
    """A recorded run's first /clock is decades past zero: no pass may fire on it."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from brainmem_ros.nodes.consolidation_node import ConsolidationNode

    context = rclpy.Context()
    rclpy.init(context=context)
    client = Client()
    try:
        node = ConsolidationNode(context=context, parameter_overrides=[
            Parameter("use_sim_time", value=True),
            Parameter("consolidation.period_s", value=60.0),
            Parameter("forgetting.period_s", value=60.0)
        ])
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def spin_with_clock(seconds: float, until, timeout: float):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and not until():
                _tick(client, seconds)
                executor.spin_once(timeout_sec=0.05)

        from brainmem_ros.core.health import Level

        assert not node.schedule_timers  # no time yet, so no schedule, and its health says why
        [waiting] = node._checks()
        assert waiting.level == Level.WARN and "/clock" in waiting.message
        spin_with_clock(1_750_000_000.0, lambda: False, timeout=2.0)
        assert len(node.schedule_timers) == 2 and not node.schedule.last, node.schedule.last
        assert node._checks()[0].level == Level.OK
        spin_with_clock(1_750_000_061.0, lambda: len(node.schedule.last) == 2, timeout=10.0)
        assert set(node.schedule.last) == {"consolidation", "forgetting"}  # a period later
        node.destroy_node()
    finally:
        client.close()
        rclpy.shutdown(context=context)


def test_a_bag_replayed_on_its_own_clock_keeps_every_memory_through_forgetting(tmp_path):
    s = _srv()
    child = _bringup(tmp_path / "replay.db", "replaybot", "--use-sim-time")
    client = Client()
    try:
        replay = Child([
            "-m", "brainmem_ros.cli", "replay",
            str(REPO / "bags" / "kitchen_run"), "--clock", "--namespace", "replaybot", "--rate", "0"
        ], cwd=REPO)
        assert replay.proc.wait(timeout=120) == 0, replay.output()
        replay.stop()
        wm = client.wait_until(lambda: len(
            (w := client.call(s.GetWorkingMemory, "/replaybot/brainmem/get_working_memory",
                              s.GetWorkingMemory.Request(agent_id="robot"))).traces) == 12 and w)
        assert all(t.created.sec >= 1_750_000_000 for t in wm.traces)  # the bag's own stamps
        moved = client.call(s.Consolidate, "/replaybot/brainmem/consolidate",
                            s.Consolidate.Request(agent_id="robot", reason="manual"))
        assert moved.success and moved.promoted > 0
        forget = client.call(s.Forget, "/replaybot/brainmem/forget", s.Forget.Request(decay=True))
        assert forget.success and forget.decayed > 0 and forget.archived == 0
        answer = _retrieve(client, "replaybot", "robot", "where is the butter?")
        assert any("counter" in m.content for m in answer.memories)
    finally:
        client.close()
        _stop(child)


@pytest.fixture(scope="module")
def graphbot(tmp_path_factory):
    child = _bringup(tmp_path_factory.mktemp("graph") / "memory.db", "graphbot")
    client = Client()
    yield client
    client.close()
    _stop(child)


def test_what_was_seen_a_moment_ago_is_in_the_answer_with_default_fields(graphbot):
    m = _msg()
    graphbot.publish(m.Observation, "/graphbot/brainmem/observation",
                     m.Observation(agent_id="robot", text="The butter is in the fridge."))

    def answered():
        r = _retrieve(graphbot, "graphbot", "robot", "where is the butter?")
        return r if any("fridge" in x.content for x in r.memories) else None

    answer = graphbot.wait_until(answered, timeout=3.0, every=0.1)
    assert any(x.zone == "working" and "working" in x.routes for x in answer.memories)


def test_spatial_recall_in_another_frame_and_bad_requests_are_refused(graphbot):
    from geometry_msgs.msg import Point

    m = _msg()
    graphbot.publish(
        m.Observation, "/graphbot/brainmem/observation",
        m.Observation(agent_id="robot", text="a red mug on the shelf", has_position=True,
                      position=Point(x=1.0, y=1.0)))
    graphbot.wait_until(lambda: any("mug" in x.content for x in _retrieve(
        graphbot, "graphbot", "robot", "mug", has_position=True, position=Point(x=1.0, y=1.0),
        radius=1.0).memories))
    for fields, fragment in (({
            "frame_id": "odom"
    }, "unknown frame"), ({
            "frame_id": "a b"
    }, "not a frame name"), ({
            "radius": -1.0
    }, "radius"), ({
            "radius": math.nan
    }, "radius")):
        request = {"has_position": True, "position": Point(x=1.0, y=1.0), "radius": 1.0, **fields}
        answer = _retrieve(graphbot, "graphbot", "robot", "what is here?", **request)
        assert not answer.success and fragment in answer.message, (fields, answer.message)


def test_a_stamp_far_in_the_future_is_dropped_and_stores_nothing(graphbot):
    s, m = _srv(), _msg()
    future = m.Observation(agent_id="timetraveller", text="the clock is on the wall")
    future.header.stamp.sec = 2**31 - 1
    graphbot.publish(m.Observation, "/graphbot/brainmem/observation", future)
    entry = m.MemoryEntry(agent_id="timetraveller", zone="semantic", content="a fact from 2038")
    entry.created.sec = 2**31 - 1
    stored = graphbot.call(s.StoreMemory, "/graphbot/brainmem/store_memory",
                           s.StoreMemory.Request(entries=[entry]))
    assert not stored.success and "ahead of the clock" in stored.message
    graphbot.publish(m.Observation, "/graphbot/brainmem/observation",
                     m.Observation(agent_id="timetraveller", text="the kettle is on the stove"))
    wm = graphbot.wait_until(lambda: (w := graphbot.call(
        s.GetWorkingMemory, "/graphbot/brainmem/get_working_memory",
        s.GetWorkingMemory.Request(agent_id="timetraveller"))).traces and w)
    assert [t.content for t in wm.traces] == ["the kettle is on the stove"]


def test_every_parameter_is_listed_with_a_value_and_start_only_ones_are_refused(graphbot):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters

    node = "/graphbot/store_node"
    listed = graphbot.call(ListParameters, f"{node}/list_parameters", ListParameters.Request())
    names = list(listed.result.names)
    assert {"encoding.entities", "encoding.places", "store.frames",
            "snapshot_period_s"} <= set(names)
    values = graphbot.call(GetParameters, f"{node}/get_parameters",
                           GetParameters.Request(names=names)).values
    assert len(values) == len(names)
    assert all(v.type != ParameterType.PARAMETER_NOT_SET for v in values)

    def set_(name, value):
        request = SetParameters.Request(parameters=[Parameter(name=name, value=value)])
        return graphbot.call(SetParameters, f"{node}/set_parameters", request).results[0]

    refused = set_("snapshot_period_s",
                   ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=1.0))
    assert not refused.successful and "read at start" in refused.reason
    live = set_("retrieval.top_k",
                ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=7))
    assert live.successful, live.reason
    out_of_range = set_("retrieval.top_k",
                        ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=-1))
    assert not out_of_range.successful


@pytest.mark.parametrize("namespace", ["robot 1", "1robot", "robot//one", "robot-1"])
def test_a_namespace_ros_does_not_allow_is_refused_before_anything_starts(tmp_path, namespace):
    up = Child([
        "-m", "brainmem_ros.cli", "bringup", "--store",
        str(tmp_path / "m.db"), "--namespace", namespace
    ], cwd=REPO)
    assert up.proc.wait(timeout=30) == 2
    up.stop()
    assert "is not a ROS namespace" in up.output() and not (tmp_path / "m.db").exists()
