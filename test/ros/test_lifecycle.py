"""store_node as a managed node, driven through the lifecycle_msgs services over DDS.

Every transition in order and out of order, requests refused while not active, and nothing that
was acknowledged lost across deactivate, cleanup and shutdown.
"""
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from processes import Child
from ros_client import Client, Watch

REPO = Path(__file__).resolve().parents[2]
NODE = "/lc/store_node"


def _lifecycle():
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    return Transition, ChangeState, GetState


def _state(client) -> str:
    _, _, GetState = _lifecycle()
    return client.call(GetState, f"{NODE}/get_state", GetState.Request()).current_state.label


def _change(client, label: str) -> bool:
    Transition, ChangeState, _ = _lifecycle()
    return client.call(ChangeState, f"{NODE}/change_state",
                       ChangeState.Request(transition=Transition(label=label)),
                       timeout=120.0, resend_s=0).success  # a transition is taken once


def _store(client, text: str):
    import brainmem_ros.msg as m
    import brainmem_ros.srv as s
    return client.call(s.StoreMemory, "/lc/brainmem/store_memory", s.StoreMemory.Request(
        entries=[m.MemoryEntry(agent_id="robot", zone="semantic", content=text)]))


def _retrieve(client, query: str):
    import brainmem_ros.srv as s
    return client.call(s.RetrieveMemory, "/lc/retrieve_memory",
                       s.RetrieveMemory.Request(agent_id="robot", query=query))


def _ingest(client, text: str):
    import numpy as np

    import brainmem_ros.msg as m
    import brainmem_ros.srv as s
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
    trace = m.Trace(agent_id="robot", kind=m.Trace.KIND_OBSERVATION, text=text,
                    embedding=vector.tolist(), confidence=1.0)
    return client.call(s.IngestTraces, "/lc/brainmem/ingest_traces",
                       s.IngestTraces.Request(traces=[trace]))


def _stored_ids(store: Path) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "brainmem_ros.cli", "inspect", "--store",
                          str(store), "--json"], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    report = json.loads(out.stdout)
    assert report["integrity_ok"], report
    return set(report["ids"])


@pytest.fixture
def managed(tmp_path):
    """Start a store_node that waits for a lifecycle manager (autostart false), and a client."""
    store = tmp_path / "memory.db"
    node = Child(["-m", "brainmem_ros.nodes", "store_node", "--ros-args", "-r", "__ns:=/lc", "-p",
                  f"store.path:={store}", "-p", "autostart:=false", "-p",
                  "consolidation.every_n_traces:=0"], cwd=REPO)
    client = Client("lifecycle_test")
    client.wait_until(lambda: _state(client) == "unconfigured", timeout=60)
    yield node, client, store
    client.close()
    node.stop(signal.SIGINT, timeout=30)


def test_transitions_in_order_serve_only_while_active_and_lose_nothing(managed):
    node, client, store = managed
    refused = _retrieve(client, "where is the butter?")
    assert not refused.success and "unconfigured, not active" in refused.message
    assert _change(client, "configure") and _state(client) == "inactive"
    refused = _store(client, "the butter is in the fridge")
    assert not refused.success and "inactive, not active" in refused.message and not refused.ids
    assert _change(client, "activate") and _state(client) == "active"
    acknowledged = [_store(client, f"the {thing} is in the fridge").ids[0]
                    for thing in ("butter", "milk", "cheese")]
    held = _ingest(client, "the jam is on the shelf")
    assert held.success
    acknowledged.append(held.ids[0])
    assert _retrieve(client, "where is the butter?").success

    assert _change(client, "deactivate") and _state(client) == "inactive"
    later = _ingest(client, "the egg is in the bowl")
    assert not later.success and later.retry, "a sender should hold traces for an inactive store"
    assert not _retrieve(client, "where is the milk?").success
    assert _change(client, "cleanup") and _state(client) == "unconfigured"
    assert set(acknowledged) <= _stored_ids(store)  # closed: every acknowledged memory on disk

    assert _change(client, "configure") and _change(client, "activate")
    answer = _retrieve(client, "where is the cheese?")
    assert answer.success and any("cheese" in m.content for m in answer.memories)
    assert "the jam is on the shelf" in _retrieve(client, "where is the jam?").memory_prompt
    assert _change(client, "shutdown") and _state(client) == "finalized"
    assert not _retrieve(client, "where is the cheese?").success
    assert node.stop(signal.SIGINT, timeout=30) == 0, node.output()
    assert set(acknowledged) <= _stored_ids(store)


def test_transitions_out_of_order_are_refused_and_the_node_stays_up(managed):
    node, client, store = managed
    assert not _change(client, "activate")  # from unconfigured
    assert not _change(client, "deactivate")
    assert not _change(client, "cleanup")
    assert not _change(client, "no_such_transition")
    assert _state(client) == "unconfigured" and node.proc.poll() is None
    assert _change(client, "configure")
    assert not _change(client, "configure")  # twice
    assert _state(client) == "inactive"
    assert _change(client, "activate") and _store(client, "the cup is on the table").success


def test_a_configure_that_fails_leaves_the_node_up_and_says_why(tmp_path):
    from diagnostic_msgs.msg import DiagnosticStatus

    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the store's folder should be")
    node = Child(["-m", "brainmem_ros.nodes", "store_node", "--ros-args", "-r", "__ns:=/lc", "-p",
                  f"store.path:={blocker / 'memory.db'}", "-p", "autostart:=false", "-p",
                  "health.period_s:=0.3"], cwd=REPO)
    client = Client("lifecycle_test")
    watch = Watch(client, "lc")
    try:
        client.wait_until(lambda: _state(client) == "unconfigured", timeout=60)
        watch.level("store_node", DiagnosticStatus.WARN, "unconfigured: not serving")
        assert not _change(client, "configure")
        assert _state(client) == "unconfigured" and node.proc.poll() is None
        watch.level("store_node", DiagnosticStatus.ERROR, "configure failed")
        answer = _retrieve(client, "anything?")
        assert not answer.success and "not active" in answer.message
    finally:
        client.close()
        assert node.stop(signal.SIGINT, timeout=30) == 0
    assert "configure failed" in node.output() and str(blocker) in node.output()


def test_with_autostart_a_store_that_cannot_open_stops_the_node_with_the_reason(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    out = subprocess.run([sys.executable, "-m", "brainmem_ros.nodes", "store_node", "--ros-args",
                          "-p", f"store.path:={blocker / 'memory.db'}"], capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert out.returncode == 1
    assert "[FATAL] cannot start: configure failed" in out.stderr + out.stdout
