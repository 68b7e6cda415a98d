"""Agent isolation under concurrency, with the real model.

Agent isolation under concurrency: writers and readers of four agents at once, real model; no answer
may ever carry another agent's private memory (shared ones are for everyone).
"""
import threading
import traceback

from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import Entry, Zone

AGENTS = ["ada", "bob", "cyd", "dee"]


def test_no_private_memory_crosses_agents_under_load(make_memory, minilm):
    memory = make_memory(minilm)
    errors: list[str] = []
    leaks: list[tuple[str, str]] = []
    seen = {a: 0 for a in AGENTS}
    stop = threading.Event()

    def writer(agent):
        try:
            for i in range(40):
                memory.store_entries([
                    Entry(agent, Zone.EPISODIC, f"{agent}'s secret {i}: the key is in the drawer",
                          None)
                ])
                memory.observe(agent, f"{agent} sees the butter on shelf {i}")
                if i % 10 == 0:
                    memory.store_entries([
                        Entry(agent, Zone.SEMANTIC, f"shared note {i} from {agent}: knives cut",
                              None, shared=True)
                    ])
                    memory.consolidate(agent)
        except Exception as exc:  # the test reports it; a thread must not die silently
            errors.append(f"writer {agent}: {exc!r} {traceback.format_exc()}")

    def reader(agent):
        try:
            while not stop.is_set():
                for other in AGENTS:
                    result = memory.retrieve(
                        RetrievalRequest(agent, f"{other}'s secret: where is the key?", top_k=10,
                                         include_working=True))
                    for recall in result.recalls:
                        e = recall.entry
                        if e.agent_id != agent and not e.shared:
                            leaks.append((agent, e.content))
                    seen[agent] += len(result.recalls)
        except Exception as exc:
            errors.append(f"reader {agent}: {exc!r}")

    writers = [threading.Thread(target=writer, args=(a, )) for a in AGENTS]
    readers = [threading.Thread(target=reader, args=(a, )) for a in AGENTS]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    stop.set()
    for t in readers:
        t.join(timeout=60)
    assert not errors, errors[:3]
    assert not leaks, leaks[:3]
    assert all(n > 0
               for n in seen.values())  # the readers did get answers: their own and shared memories
    final = memory.retrieve(RetrievalRequest("ada", "shared note: knives cut", top_k=20))
    assert {r.entry.agent_id for r in final.recalls if r.entry.shared} > {"ada"}
