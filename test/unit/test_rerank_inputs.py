"""The in-RAM rerank inputs.

The in-RAM rerank inputs: right values through adds, touches and removals (with the compaction that
drops removed rows), and the store's per-memory maps never handed to the garbage collector, whose
walks over them were multi-millisecond pauses inside retrievals.
"""
import gc

import numpy as np

from brainmem_ros.core.embedding import HashingEmbedder
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.store.rerank_inputs import RerankInputs
from brainmem_ros.core.trace import Entry, Zone


def test_values_follow_adds_touches_and_removals_through_compaction():
    table = RerankInputs()
    rowids = list(range(1, 5001))
    table.add(rowids, np.array([(0.5, float(r), float(r), 1.0) for r in rowids]))
    table.touch(7, 0.9, 1e9, confidence=0.4)
    table.touch(999999, 0.1, 0.0)  # unknown: ignored
    for rowid in range(100, 4000):
        table.remove(rowid)
    assert len(table) == 5000 - 3900 and 100 not in table and 4000 in table
    live, values = table.of([7, 150, 4000, 5000])
    assert live == [7, 4000, 5000]
    np.testing.assert_array_equal(
        values, [[0.9, 1e9, 7.0, 0.4], [0.5, 4000.0, 4000.0, 1.0], [0.5, 5000.0, 5000.0, 1.0]])
    table.add([6000], np.array([[0.2, 1.0, 2.0, 0.3]]))
    assert table.of([6000])[1].tolist() == [[0.2, 1.0, 2.0, 0.3]]


def test_retrievals_and_writes_leave_the_per_memory_maps_untracked(tmp_path):
    emb = HashingEmbedder()
    store = LongTermStore(tmp_path / "m.db")
    texts = [f"note {i} about the kettle" for i in range(300)]
    store.add([Entry("a", Zone.EPISODIC, t, v) for t, v in zip(texts, emb.embed(texts))])
    gc.collect()
    rowids = list(store._vectors.where)[:5]
    store.record_access(rowids, [0.7] * 5, 123.0)  # what every retrieval does
    store.add([Entry("a", Zone.EPISODIC, "one more note", emb.embed(["one more note"])[0])])
    assert not gc.is_tracked(store._vectors.scoring._row) and not gc.is_tracked(
        store._vectors.where)
    assert store.scoring_inputs(rowids)[2][:, :2].tolist() == [[0.7, 123.0]] * 5
    store.close()
