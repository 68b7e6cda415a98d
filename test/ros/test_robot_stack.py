"""What a robot stack expects of a memory server, over real DDS between processes.

Health on /diagnostics that turns WARN and ERROR under faults caused here and back to OK; what is
remembered drawn as latched markers that follow supersession; captions placed at the robot's pose
found again by spatial recall; goal events a late consolidation node does not miss.
"""
import math
import signal
import subprocess
import time
from pathlib import Path

import pytest

from processes import Child
from ros_client import Client, Watch

REPO = Path(__file__).resolve().parents[2]
NS = "bot"
FAST_HEALTH = ["-p", "health.period_s:=0.3", "-p", "health.backlog_warn:=5", "-p",
               "health.free_disk_warn_mb:=16.0", "-p", "health.free_disk_error_mb:=4.0", "-p",
               "marker_period_s:=0.2", "-p", "consolidation.period_s:=3600.0", "-p",
               "forgetting.period_s:=3600.0", "-p", "consolidation.every_n_traces:=0"]


def _tmpfs(folder: Path) -> bool:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Start the memory nodes and caption_node in /bot, one process each."""
    store = tmp_path_factory.mktemp("stack") / "memory.db"
    child = Child(["-m", "brainmem_ros.cli", "bringup", "--captions", "--namespace", NS,
                   "--store", str(store), "--ros-args", *FAST_HEALTH], cwd=REPO)
    client = Client("stack_test")
    watch = Watch(client, NS)
    try:
        child.wait_for_line(f"up in /{NS}", timeout=120)
        yield child, client, watch, store
    finally:
        client.close()
        code = child.stop(signal.SIGINT, timeout=60)
        assert code == 0, child.output()


def _levels():
    from diagnostic_msgs.msg import DiagnosticStatus
    return DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


def _store(client, text, agent="robot", position=None):
    import brainmem_ros.msg as m
    import brainmem_ros.srv as s
    entry = m.MemoryEntry(agent_id=agent, zone="semantic", content=text)
    if position:
        entry.position.x, entry.position.y = position
        entry.has_position = True
    return client.call(s.StoreMemory, f"/{NS}/brainmem/store_memory",
                       s.StoreMemory.Request(entries=[entry]))


def _retrieve(client, query, agent="robot", **fields):
    import brainmem_ros.srv as s
    return client.call(s.RetrieveMemory, f"/{NS}/retrieve_memory",
                       s.RetrieveMemory.Request(agent_id=agent, query=query, **fields))


def _working(client, agent):
    import brainmem_ros.srv as s
    return client.call(s.GetWorkingMemory, f"/{NS}/brainmem/get_working_memory",
                       s.GetWorkingMemory.Request(agent_id=agent)).traces


def _lifecycle(client, label):
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState
    return client.call(ChangeState, f"/{NS}/store_node/change_state",
                       ChangeState.Request(transition=Transition(label=label)), 60.0,
                       resend_s=0).success  # a transition is taken once


def test_every_memory_node_reports_its_health_with_figures(stack):
    _, client, watch, _ = stack
    ok, _, _ = _levels()
    store = watch.level("store_node", ok)
    values = {kv.key: kv.value for kv in store.values}
    assert {"state", "long-term memories", "working-memory traces", "free disk MB", "store MB",
            "vector index", "retrievals in the last minute"} <= set(values)
    assert values["state"] == "active" and store.hardware_id == NS
    _retrieve(client, "where is the butter?")
    watch.until(lambda: {kv.key: kv.value for kv in watch.status[f"{NS}/store_node: memory store"]
                         .values}.get("retrieval p99 ms"), what="retrieval latency figures")
    watch.level("encoder_node", ok)
    watch.level("consolidation_node", ok)


def test_a_store_made_read_only_is_an_error_until_it_can_write_again(stack):
    _, client, watch, store = stack
    files = [str(store), f"{store}-wal"]  # not -shm: it is mapped, and a mapped write would fault
    if subprocess.run(["chattr", "+i", *files], capture_output=True).returncode:
        pytest.skip("cannot make the store immutable here (chattr needs root)")
    ok, _, error = _levels()
    try:
        watch.level("store_node", error, "not writable")
        refused = _store(client, "the kettle is in the sink")
        assert not refused.success and "write" in refused.message and not refused.ids
        watch.level("store_node", error, "last write failed")
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)
    watch.level("store_node", ok)
    assert _store(client, "the kettle is in the sink").success
    assert "the kettle is in the sink" in _retrieve(client, "where is the kettle?").memory_prompt


def test_a_disk_filling_up_warns_then_is_an_error_and_clears_when_space_is_freed(tmp_path):
    disk = tmp_path / "disk"
    if not _tmpfs(disk):
        pytest.skip("cannot mount a tmpfs here (needs root): no small disk to fill")
    node = Child(["-m", "brainmem_ros.nodes", "store_node", "--ros-args", "-r", "__ns:=/disk",
                  "-p", f"store.path:={disk / 'memory.db'}", *FAST_HEALTH], cwd=REPO)
    client = Client("disk_test")
    watch = Watch(client, "disk")
    try:
        node.wait_for_line("active: serving", timeout=120)
        _filled(disk, watch, client)
    finally:
        client.close()
        code = node.stop(signal.SIGINT, timeout=30)
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    assert code == 0, node.output()


def _filled(disk: Path, watch, client) -> None:
    """Fill ``disk`` to below each threshold, then free it, watching the store's level."""
    import os

    import brainmem_ros.srv as s

    ok, warn, error = _levels()
    watch.level("store_node", ok)
    ballast = disk / "ballast"

    def fill_to(free_mb: float) -> None:
        stats = os.statvfs(disk)
        have = stats.f_bavail * stats.f_frsize
        with open(ballast, "ab") as f:
            f.write(b"\0" * int(have - free_mb * 1024 * 1024))

    try:
        fill_to(10.0)
        watch.level("store_node", warn, "disk filling up")
        fill_to(2.0)
        watch.level("store_node", error, "disk nearly full")
        assert client.call(s.RetrieveMemory, "/disk/retrieve_memory", s.RetrieveMemory.Request(
            agent_id="robot", query="where is the butter?")).success  # reading still works
    finally:
        ballast.unlink()
    watch.level("store_node", ok)


def test_a_backlog_warns_while_the_store_is_inactive_and_clears_once_it_serves(stack):
    _, client, watch, _ = stack
    import brainmem_ros.msg as m

    ok, warn, _ = _levels()
    assert _lifecycle(client, "deactivate")
    try:
        watch.level("store_node", warn, "inactive")
        for i in range(8):
            client.publish(m.Observation, f"/{NS}/brainmem/observation",
                           m.Observation(agent_id="backlog", text=f"crate {i} is on the shelf",
                                         confidence=1.0))
        watch.level("encoder_node", warn, "backlog")
    finally:
        assert _lifecycle(client, "activate")
    watch.level("encoder_node", ok, timeout=60)
    watch.level("store_node", ok)
    traces = watch.until(lambda: len(_working(client, "backlog")) == 8 or None, 30,
                         "every held observation stored")
    assert traces


def _things(array, name):
    return [mk for mk in array.markers if mk.type == mk.SPHERE and mk.id == _id_of(array, name)]


def _id_of(array, name):
    for mk in array.markers:
        if mk.type == mk.TEXT_VIEW_FACING and mk.text.startswith(f"{name}:"):
            return mk.id
    return None


def test_markers_show_remembered_things_and_follow_a_superseding_fact(stack, tmp_path):
    _, client, watch, _ = stack
    assert _store(client, "the butter is in the fridge", agent="chef", position=(1.0, 2.0))
    watch.subscribe_markers()  # after the change: the latched array carries it

    def butter_at(x, y):
        def check():
            for array in reversed(watch.markers):
                spheres = _things(array, "butter")
                if spheres and math.isclose(spheres[0].pose.position.x, x) and \
                        math.isclose(spheres[0].pose.position.y, y):
                    return array
            return None
        return check

    first = watch.until(butter_at(1.0, 2.0), what="a butter marker at (1, 2)")
    assert first.markers[0].action == first.markers[0].DELETEALL
    [sphere] = _things(first, "butter")
    assert sphere.header.frame_id == "map" and sphere.ns == "chef/things"
    assert _store(client, "the butter is on the counter", agent="chef", position=(4.0, 0.5))
    moved = watch.until(butter_at(4.0, 0.5), what="the butter marker moved to (4, 0.5)")
    assert len(_things(moved, "butter")) == 1  # the superseded place is gone
    from brainmem_ros.inspection.map_view import draw_markers
    png = draw_markers(moved.markers, tmp_path / "map.png")
    assert png.stat().st_size > 10_000


def test_captions_placed_at_the_robot_pose_are_found_by_position(stack):
    child, client, watch, _ = stack
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import String

    pose = PoseStamped()
    pose.header.frame_id = "map"
    pose.pose.position.x, pose.pose.position.y = 3.0, 4.0

    def caption(text):
        client.publish(String, f"/{NS}/caption", String(data=text))

    deadline = time.monotonic() + 20
    found = []
    while not found and time.monotonic() < deadline:  # poses are a stream: keep it flowing
        pose.header.stamp = client.node.get_clock().now().to_msg()
        client.publish(PoseStamped, f"/{NS}/pose", pose)
        caption("a red mug is on the table")
        time.sleep(0.5)
        found = [t for t in _working(client, "robot") if "red mug" in t.content and
                 t.has_position]
    assert found and (found[0].position.x, found[0].position.y) == (3.0, 4.0)
    assert found[0].frame_id == "map" and found[0].source == "caption"
    near = _retrieve(client, "what is on the table?", has_position=True, radius=0.5,
                     position=found[0].position)
    assert near.success and any("red mug" in mem.content for mem in near.memories)
    far = _retrieve(client, "mug", has_position=True, radius=0.5,
                    position=type(found[0].position)(x=-10.0, y=-10.0))
    assert not any("red mug" in mem.content and "spatial" in mem.routes for mem in far.memories)


def test_bad_captions_and_poses_are_dropped_with_a_reason_and_store_nothing(stack):
    child, client, watch, _ = stack
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import String

    before = len(_working(client, "robot"))
    for text in ["", "   ", "x" * 5000]:
        client.publish(String, f"/{NS}/caption", String(data=text))
    child.wait_for_line("caption dropped: caption is 5000 characters", timeout=20)
    bad = PoseStamped()
    bad.header.frame_id = "map"
    bad.pose.position.x = math.nan
    client.publish(PoseStamped, f"/{NS}/pose", bad)
    child.wait_for_line("pose dropped: pose (nan", timeout=20)
    odom = PoseStamped()
    odom.header.frame_id = "odom"
    client.publish(PoseStamped, f"/{NS}/pose", odom)
    child.wait_for_line("pose in frame 'odom'", timeout=20)
    time.sleep(1.5)  # every earlier pose is now too old to place anything
    client.publish(String, f"/{NS}/caption", String(data="a green bowl is in the sink"))
    bowl = watch.until(lambda: [t for t in _working(client, "robot") if "green bowl" in t.content],
                       what="the caption without a pose stored")
    assert not bowl[0].has_position  # neither the NaN pose nor the odom one placed it
    assert len(_working(client, "robot")) == before + 1
    assert _retrieve(client, "where is the bowl?").success


def test_goal_events_reach_a_consolidation_node_started_after_the_goal_finished(tmp_path):
    import brainmem_ros.msg as m
    import brainmem_ros.srv as s

    args = ["--ros-args", "-r", "__ns:=/late", "-p", f"store.path:={tmp_path / 'm.db'}", "-p",
            "consolidation.period_s:=3600.0", "-p", "consolidation.every_n_traces:=0"]
    store = Child(["-m", "brainmem_ros.nodes", "store_node", *args], cwd=REPO)
    client = Client("late_test")
    late = None
    try:
        store.wait_for_line("active: serving", timeout=120)
        push = client.call(s.UpdateGoal, "/late/brainmem/update_goal", s.UpdateGoal.Request(
            operation=s.UpdateGoal.Request.OP_PUSH,
            goal=m.Goal(agent_id="r", description="make toast")))
        import numpy as np
        vector = (np.ones(384) / np.sqrt(384)).tolist()
        for action in ("take the bread", "turn on the toaster"):
            trace = m.Trace(agent_id="r", kind=m.Trace.KIND_ACTION, text=action, action=action,
                            success=True, has_success=True, goal_id=push.goal.id,
                            embedding=vector, confidence=1.0)
            assert client.call(s.IngestTraces, "/late/brainmem/ingest_traces",
                               s.IngestTraces.Request(traces=[trace])).success
        done = client.call(s.UpdateGoal, "/late/brainmem/update_goal", s.UpdateGoal.Request(
            operation=s.UpdateGoal.Request.OP_COMPLETE, goal=m.Goal(agent_id="r")))
        assert done.success

        def procedures():
            return [x for x in client.call(
                s.RetrieveMemory, "/late/retrieve_memory",
                s.RetrieveMemory.Request(agent_id="r", query="how do I make toast?",
                                         zones=["procedural"])).memories]

        assert not procedures()  # nobody has consolidated the goal yet
        late = Child(["-m", "brainmem_ros.nodes", "consolidation_node", *args], cwd=REPO)
        procedure = client.wait_until(procedures, timeout=60)
        assert "take the bread" in procedure[0].content
    finally:
        client.close()
        if late is not None:
            assert late.stop(signal.SIGINT, timeout=30) == 0, late.output()
        assert store.stop(signal.SIGINT, timeout=30) == 0, store.output()


def test_the_map_command_draws_a_stacks_markers_and_says_when_there_are_none(stack, tmp_path):
    _, client, _, _ = stack
    import sys

    assert _store(client, "the sponge is in the sink", position=(2.0, 1.0)).success
    png = tmp_path / "map.png"
    drawn = subprocess.run([sys.executable, "-m", "brainmem_ros.cli", "map", "--namespace", NS,
                            "--png", str(png)], capture_output=True, text=True, timeout=60,
                           cwd=REPO)
    assert drawn.returncode == 0, drawn.stderr
    assert png.stat().st_size > 10_000
    none = subprocess.run([sys.executable, "-m", "brainmem_ros.cli", "map", "--namespace",
                           "nobody_here", "--timeout", "1", "--png", str(tmp_path / "x.png")],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert none.returncode == 2 and "no markers on /nobody_here/brainmem/markers" in none.stderr
