"""SIGKILL at any moment during heavy ingest loses nothing that was acknowledged.

store_node runs as its own process on a real SQLite + FAISS store. A client streams StoreMemory
(long-term entries) and IngestTraces (working-memory traces) requests with real MiniLM vectors and
notes every id a response acknowledged (working memory is sized so that nothing is evicted by
design, and nothing consolidates on its own, so every acknowledged id must still be there). The node
is killed with SIGKILL at a random moment, twenty times; after each restart ``brainmem-ros inspect
--json`` must list every acknowledged id and report the SQLite file intact and the vector index in
agreement with it.
"""
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


from processes import Child
from ros_client import Client
from brainmem_ros.nodes import names

REPO = Path(__file__).resolve().parents[2]
KILLS = 20
TEXTS = [
    f"the {item} is on the {place} in the {room}"
    for item in ("butter", "knife", "mug", "tomato", "sponge")
    for place in ("counter", "shelf", "table") for room in ("kitchen", "pantry")
]


def start(store: Path) -> Child:
    node = Child([
        "-m", "brainmem_ros.nodes", "store_node", "--ros-args", "-p", f"store.path:={store}", "-p",
        "consolidation.every_n_traces:=0", "-p", "working.max_traces:=100000", "-p",
        "snapshot_period_s:=0.5"
    ], cwd=REPO)
    node.wait_for_line("memory store", timeout=60)
    return node


def inspect(store: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "brainmem_ros.cli", "inspect", "--store",
         str(store), "--json"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_twenty_sigkills_during_ingest_lose_no_acknowledged_memory(tmp_path, minilm):
    from brainmem_ros.msg import MemoryEntry, Trace
    from brainmem_ros.srv import IngestTraces, StoreMemory

    vectors = minilm.embed(TEXTS)
    store = tmp_path / "memory.db"
    acknowledged: set[str] = set()
    rng = random.Random(7)
    client = Client("crash_client")
    try:
        for round_ in range(KILLS):
            node = start(store)
            stop = threading.Event()
            errors: list[str] = []

            def stream():
                n = 0
                while not stop.is_set():
                    n += 1
                    picks = [rng.randrange(len(TEXTS)) for _ in range(8)]
                    try:
                        if n % 2:
                            r = client.call(
                                StoreMemory, names.STORE_MEMORY,
                                StoreMemory.Request(entries=[
                                    MemoryEntry(agent_id="robot", zone="episodic",
                                                content=f"{TEXTS[i]} ({round_}.{n})",
                                                embedding=vectors[i].tolist(), importance=0.5)
                                    for i in picks
                                ]), timeout=3.0)
                        else:
                            r = client.call(
                                IngestTraces, names.INGEST_TRACES,
                                IngestTraces.Request(traces=[
                                    Trace(agent_id="robot", kind=Trace.KIND_OBSERVATION,
                                          text=f"{TEXTS[i]} ({round_}.{n})", embedding=vectors[i].
                                          tolist(), confidence=1.0, source="test") for i in picks
                                ]), timeout=3.0)
                    except TimeoutError:
                        return  # the node is gone: this request was never acknowledged
                    if r.success:
                        acknowledged.update(r.ids)
                    else:
                        errors.append(r.message)

            worker = threading.Thread(target=stream)
            worker.start()
            time.sleep(rng.uniform(0.3, 1.5))
            node.stop(sig=signal.SIGKILL)
            stop.set()
            worker.join(timeout=10)
            assert not errors, errors[:3]

            after = start(store)  # restart, then look at the file as an operator would
            try:
                report = inspect(store)
            finally:
                after.stop(sig=signal.SIGKILL)
            missing = acknowledged - set(report["ids"])
            assert not missing, (f"round {round_}: {len(missing)} acknowledged ids lost, "
                                 f"e.g. {sorted(missing)[:3]}")
            assert report["integrity_ok"], report["integrity"]
        assert len(acknowledged) > 200 and report["counts"]["robot"]["working"] > 0
        print(
            f"\n{KILLS} SIGKILLs, {len(acknowledged)} acknowledged ids, all present, integrity ok "
            "each time")
    finally:
        client.close()
