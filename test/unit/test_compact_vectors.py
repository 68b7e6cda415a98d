"""Vectors held as int8 in RAM (``store.ram_precision: int8``): a quarter of the bytes, same finds.

The codes lose about a thousandth of cosine; what must not change is what the store finds, what it
keeps across a restart, and that switching precision costs a graph rebuild, never a memory.
"""
import faiss
import numpy as np
import pytest

from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.store.graph import IndexSettings
from brainmem_ros.core.store.partition import Partition
from brainmem_ros.core.store.rows import RowVectors
from brainmem_ros.core.trace import Zone

from test_long_term import EMB, TEXTS, answers, fill, filled_and_closed

COMPACT = IndexSettings(exact_below=50, ram_precision="int8", rescore_factor=2)
FLOAT = IndexSettings(exact_below=50)


def unit_rows(n, seed=0):
    rows = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_int8_rows_keep_cosines_within_a_few_thousandths_in_a_quarter_of_the_bytes():
    vectors, queries = unit_rows(2000), unit_rows(20, seed=1)
    rows = RowVectors(384, "int8", 2000)
    rows.put(slice(0, 2000), vectors)
    exact = vectors @ queries.T
    coded = np.stack([rows.dot(slice(0, 2000), q) for q in queries], axis=1)
    assert np.abs(coded - exact).max() < 3e-3 and np.abs(coded - exact).mean() < 5e-4
    picked = np.array([5, 1999, 0])
    assert np.allclose(rows.dot(picked, queries[0]), exact[picked, 0], atol=3e-3)
    assert np.allclose(rows.take(picked), vectors[picked], atol=0.01)
    assert rows.nbytes < RowVectors(384, "float32", 2000).nbytes / 3.5
    grown = rows.grown(5000, 2000)
    assert len(grown) == 5000 and np.array_equal(grown.take(picked), rows.take(picked))
    assert np.array_equal(rows.subset(picked).take(slice(0, 3)), rows.take(picked))


def test_an_unknown_ram_precision_is_refused():
    with pytest.raises(ValueError, match="float32, int8"):
        RowVectors(384, "int4")


def test_a_compact_store_finds_what_the_float_store_finds(tmp_path):
    stores = {name: LongTermStore(tmp_path / f"{name}.db", index=settings)
              for name, settings in (("float", FLOAT), ("int8", COMPACT))}
    for store in stores.values():
        fill(store)
        assert store.wait_indexed(timeout=30)
    graph = stores["int8"]._vectors.partitions[("a", "episodic")].hnsw
    assert isinstance(graph, faiss.IndexHNSWSQ)
    as_close = total = 0
    for text in TEXTS[::7]:
        q = EMB.embed([text])[0]
        found = {name: s.vector_search(q, "a", [Zone.EPISODIC], 5) for name, s in stores.items()}
        fifth = found["float"][-1][1]
        compact = stores["int8"].entries_by_rowid([r for r, _ in found["int8"]])
        exact = EMB.embed([compact[r].content for r, _ in found["int8"]]) @ q
        # Many of these texts tie: a result counts when it is as close as the float store's fifth.
        as_close += int(np.count_nonzero(exact >= fifth - 1e-4))
        total += 5
        assert exact[0] >= found["float"][0][1] - 3e-3  # the first as close as the float store's
    assert as_close / total >= 0.9
    for store in stores.values():
        store.close()


def test_a_compact_store_reopens_on_its_saved_graph_and_answers_as_before(tmp_path):
    before = filled_and_closed(tmp_path / "m.db", COMPACT)
    again = LongTermStore(tmp_path / "m.db", index=COMPACT)
    assert again.rebuilt_partitions == [] and answers(again) == before
    again.close()


def test_switching_ram_precision_rebuilds_the_graphs_and_keeps_every_memory(tmp_path):
    store = LongTermStore(tmp_path / "m.db", index=FLOAT)
    fill(store)
    store.close()
    for settings, kind in ((COMPACT, faiss.IndexHNSWSQ), (FLOAT, faiss.IndexHNSWFlat)):
        again = LongTermStore(tmp_path / "m.db", index=settings)
        assert again.rebuilt_partitions and len(again) == 300
        assert isinstance(again._vectors.partitions[("a", "episodic")].hnsw, kind)
        q = EMB.embed([TEXTS[42]])[0]
        top = again.vector_search(q, "a", [Zone.EPISODIC], 1)[0][0]
        assert again.entries_by_rowid([top])[top].content == TEXTS[42]
        again.close()


def test_a_compacted_int8_partition_keeps_its_live_rows_and_finds_them():
    part = Partition(COMPACT)
    vectors = unit_rows(2000, seed=3)
    part.add(np.arange(2000), vectors, np.zeros(2000))
    while part.index_step(500):
        pass
    for rowid in range(0, 2000, 2):
        part.remove(rowid)
    assert part.needs_compaction()
    part.compact()
    assert part.size == 1000 and part.alive_count() == 1000
    for rowid in (1, 777, 1999):
        rowids, sims = part.search(vectors[rowid], 3)
        assert rowids[0] == rowid and abs(sims[0] - 1.0) < 3e-3
        assert not set(rowids.tolist()) & set(range(0, 2000, 2))
