"""Two robots' stacks share what they learn through one PostgreSQL server, over DDS.

The server is started by the project's own command (``fleet-db``); each stack runs in its own
namespace with its own store and role, as two robots in one building would.
"""
import signal
import sqlite3
import time
from pathlib import Path

from processes import Child
from ros_client import Client, Watch

REPO = Path(__file__).resolve().parents[2]


def _stack(name: str, store: Path, dsn: str) -> Child:
    child = Child(["-m", "brainmem_ros.cli", "bringup", "--namespace", name, "--store", str(store),
                   "--fleet", dsn, "--ros-args", "-p", "fleet.period_s:=0.3", "-p",
                   "consolidation.period_s:=3600.0"], cwd=REPO)
    child.wait_for_line(f"up in /{name}", timeout=120)
    return child


def _retrieve(client, robot, query):
    import brainmem_ros.srv as s
    return client.call(s.RetrieveMemory, f"/{robot}/retrieve_memory",
                       s.RetrieveMemory.Request(agent_id="robot", query=query))


def test_what_one_robot_learns_reaches_the_other_and_a_server_outage_loses_nothing(
        fleet_server, tmp_path):
    import brainmem_ros.msg as m
    import brainmem_ros.srv as s
    from brainmem_ros.bringup import fleet_db

    stores = {name: tmp_path / f"{name}.db" for name in ("robot1", "robot2")}
    stacks = {name: _stack(name, stores[name], fleet_db.add_robot_dsn(fleet_server, name))
              for name in stores}
    client = Client("fleet_test")
    watch = Watch(client, "robot1")
    from diagnostic_msgs.msg import DiagnosticStatus
    try:
        said = client.call(s.ReportOutcome, "/robot1/brainmem/report_outcome",
                           s.ReportOutcome.Request(
                               agent_id="robot", success=False,
                               action="pour water into the coffee machine",
                               detail="the coffee machine short-circuits when wet"))
        assert said.success and said.warning_id
        started = time.monotonic()
        answer = client.wait_until(lambda: [
            w for w in _retrieve(client, "robot2", "can I pour water into the coffee machine?")
            .warnings if "robot1 found" in w
        ], timeout=10.0)
        print(f"warning in robot2's answer after {time.monotonic() - started:.2f} s: {answer}")

        fleet_db.stop(fleet_server)
        watch.level("store_node", DiagnosticStatus.WARN, "memories are kept here")
        facts = [f"shelf {i} holds {i} jars of jam" for i in range(100)]
        stored = client.call(s.StoreMemory, "/robot1/brainmem/store_memory", s.StoreMemory.Request(
            entries=[m.MemoryEntry(agent_id="robot", zone="semantic", content=f)
                     for f in facts]))
        assert stored.success and len(stored.ids) == 100
        for robot in stores:  # both keep answering without the server
            assert _retrieve(client, robot, "how many jars are on shelf 7?").success
        assert "shelf 7 holds 7 jars" in _retrieve(client, "robot1", "shelf 7 jars").memory_prompt

        fleet_db.start(fleet_server)
        watch.level("store_node", DiagnosticStatus.OK, "in step with the fleet as robot1")

        def copies():
            with sqlite3.connect(f"file:{stores['robot2']}?mode=ro", uri=True) as db:
                return dict(db.execute(
                    "SELECT content, COUNT(*) FROM entries WHERE origin = 'robot1' AND content"
                    " LIKE 'shelf % holds % jars of jam' GROUP BY content").fetchall())

        counts = client.wait_until(lambda: len(copies()) == 100 and copies(), timeout=60.0)
        assert set(counts) == set(facts) and set(counts.values()) == {1}
        assert "robot1 found: shelf 7 holds 7 jars of jam" in _retrieve(
            client, "robot2", "shelf 7 jars").memory_prompt
    finally:
        client.close()
        for child in stacks.values():
            assert child.stop(signal.SIGINT, timeout=60) == 0, child.output()
