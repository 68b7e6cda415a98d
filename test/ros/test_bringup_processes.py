"""`brainmem-ros bringup`: one process per memory node, as `ros2 launch` starts them.

Its own module: the one-process bringup of test_nodes_integration.py serves the same service names
while that module runs, and a client must not be answered by the wrong store.
"""
import json
import signal
import subprocess
import sys
from pathlib import Path


from processes import Child
from ros_client import Client
from brainmem_ros.nodes import names

REPO = Path(__file__).resolve().parents[2]


def test_bringup_with_one_process_per_node_serves_and_flushes_on_ctrl_c(tmp_path):
    """One process per node serves, and flushes on Ctrl-C.

    `bringup` (the layout ros2 launch gives): an observation goes through the encoder
    process into the store process and is recalled; Ctrl-C stops every node with exit 0 and the
    memory stored is on disk afterwards.
    """
    import brainmem_ros.msg as m
    import brainmem_ros.srv as s

    store = tmp_path / "memory.db"
    up = Child(["-m", "brainmem_ros.cli", "bringup", "--store",
                str(store)], cwd=REPO)
    try:
        line = up.wait_for_line("one process each", timeout=180)
        pids = [int(p) for p in line.split("pids ")[1].rstrip(")\n").split()]
        assert len(pids) == 3
        client = Client()
        try:
            stored = client.call(
                s.StoreMemory, names.STORE_MEMORY,
                s.StoreMemory.Request(entries=[
                    m.MemoryEntry(agent_id="p1", zone="semantic",
                                  content="The kettle is on the windowsill.")
                ]))
            assert stored.success, stored.message
            client.publish(
                m.Observation, names.OBSERVATION,
                m.Observation(agent_id="p1", text="The sponge is in the sink.", confidence=1.0))
            question = s.RetrieveMemory.Request(agent_id="p1", query="where is the sponge?")
            answer = client.wait_until(
                lambda: (r := client.call(s.RetrieveMemory, names.RETRIEVE_MEMORY, question)
                         ).memories and "sponge" in r.memories[0].content and r)
            assert "sink" in answer.memories[0].content
        finally:
            client.close()
    finally:
        code = up.stop(signal.SIGINT, timeout=60)
    assert code == 0, up.output()
    assert "stopped, memory flushed" in up.output()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
            f"/proc/{pid}/status").read_text().lower()
    seen = json.loads(
        subprocess.run(
            [sys.executable, "-m", "brainmem_ros.cli", "inspect", "--store",
             str(store), "--json"], capture_output=True, text=True, check=True, cwd=REPO).stdout)
    assert seen["integrity_ok"] and stored.ids[0] in seen["ids"]
