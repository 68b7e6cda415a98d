"""Stopping the stack however the signals come: every node exits 0 and nothing acknowledged is lost.

Scripts, supervisors and a non-interactive ``ros2 launch`` send a process group SIGINT more than
once, or SIGTERM while the nodes are still starting; a node must not die mid-teardown.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from processes import Child
from ros_client import Client

REPO = Path(__file__).resolve().parents[2]


def _acknowledged_traces(client: Client, n: int) -> list[str]:
    """Ingest n traces directly (random unit vectors: the ids matter here, not meaning)."""
    from brainmem_ros.msg import Trace
    from brainmem_ros.nodes import names
    from brainmem_ros.srv import IngestTraces

    rng = np.random.default_rng(7)
    ids = []
    for i in range(n):
        vector = rng.standard_normal(384).astype(np.float32)
        trace = Trace(agent_id="robot", kind=Trace.KIND_OBSERVATION, text=f"note {i}: the cup",
                      embedding=(vector / np.linalg.norm(vector)).tolist(), confidence=1.0)
        answer = client.call(IngestTraces, names.INGEST_TRACES,
                             IngestTraces.Request(traces=[trace]))
        assert answer.success, answer.message
        ids += list(answer.ids)
    return ids


def _stored_ids(store: Path) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "brainmem_ros.cli", "inspect", "--store",
         str(store), "--json"], capture_output=True, text=True, timeout=120, cwd=REPO)
    report = json.loads(out.stdout)
    assert report["integrity_ok"], report
    return set(report["ids"])


def test_two_sigints_in_quick_succession_every_node_exits_0_and_nothing_is_lost(tmp_path):
    store = tmp_path / "memory.db"
    up = Child(["-m", "brainmem_ros.cli", "bringup", "--store", str(store)], cwd=REPO)
    up.wait_for_line("up in /", timeout=180)
    client = Client()
    try:
        acknowledged = _acknowledged_traces(client, 20)
    finally:
        client.close()
    os.killpg(up.proc.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(up.proc.pid, signal.SIGINT)
    assert up.proc.wait(timeout=60) == 0, up.output()
    up.stop()
    assert "stopped, memory flushed" in up.output() and "Traceback" not in up.output()
    assert set(acknowledged) <= _stored_ids(store)


def test_a_sigterm_during_start_up_stops_every_node_cleanly(tmp_path):
    up = Child(["-m", "brainmem_ros.cli", "bringup", "--store",
                str(tmp_path / "memory.db")], cwd=REPO)
    time.sleep(3.0)  # the nodes are importing and loading the model
    os.killpg(up.proc.pid, signal.SIGTERM)
    assert up.proc.wait(timeout=120) == 0, up.output()
    up.stop()
    assert "Traceback" not in up.output() and "exit codes" not in up.output()


def test_a_node_given_sigint_twice_while_it_closes_exits_0(tmp_path):
    node = Child([
        "-m", "brainmem_ros.nodes", "store_node", "--ros-args", "-p",
        f"store.path:={tmp_path / 'memory.db'}"
    ], cwd=REPO)
    node.wait_for_line("memory store", timeout=120)
    os.killpg(node.proc.pid, signal.SIGINT)
    time.sleep(0.02)
    os.killpg(node.proc.pid, signal.SIGINT)
    assert node.proc.wait(timeout=60) == 0, node.output()
    node.stop()
    assert "KeyboardInterrupt" not in node.output()


@pytest.mark.parametrize("node_name", ["store_node", "consolidation_node"])
def test_a_node_signalled_again_and_again_until_it_has_gone_exits_0(tmp_path, node_name):
    """Signals that keep coming until the process is gone (ros2 launch and a supervisor at once).

    The last ones land while the interpreter finalises, after the node has closed: they must not
    turn a clean exit into death by signal (exit -2).
    """
    node = Child([
        "-m", "brainmem_ros.nodes", node_name, "--ros-args", "-p",
        f"store.path:={tmp_path / 'memory.db'}"
    ], cwd=REPO)
    ready = "memory store" if node_name == "store_node" else "forgetting every"
    node.wait_for_line(ready, timeout=120)
    deadline = time.monotonic() + 60
    while node.proc.poll() is None and time.monotonic() < deadline:
        try:
            os.killpg(node.proc.pid, signal.SIGINT)
        except ProcessLookupError:
            break
        time.sleep(0.005)
    assert node.proc.wait(timeout=5) == 0, node.output()
    node.stop()
    assert "KeyboardInterrupt" not in node.output()


def _hung_group() -> subprocess.Popen:
    """Start a process group of its own that ignores SIGINT, as a node stuck in teardown would."""
    code = ("import signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    assert child.stdout.readline().strip() == "ready"  # SIGINT is ignored from here on
    return child


def test_hung_groups_share_one_stop_deadline_then_are_killed():
    from brainmem_ros.bringup.run import stop_process_groups

    hung = [_hung_group(), _hung_group()]
    ended = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    ended.wait(timeout=30)
    began = time.monotonic()
    stop_process_groups([*hung, ended], timeout_s=3.0)
    took = time.monotonic() - began
    assert [child.returncode for child in hung] == [-signal.SIGKILL, -signal.SIGKILL]
    # a deadline of its own for each hung group would make this 6 s or more
    assert 3.0 <= took < 5.0, took
