"""Rows with identical vectors share one graph node (their twins), yet are answered row by row.

A robot stores the same sentence each time a routine repeats. A graph holds such a vector once; each
row keeps its own flags, times and deletion, so every query answers as exact search does.
"""
import numpy as np
import pytest

from brainmem_ros.core.store import graph as graph_module
from brainmem_ros.core.store import twins as twins_module
from brainmem_ros.core.store.graph import IndexSettings
from brainmem_ros.core.store.partition import Partition

DIM = 16
SETTINGS = IndexSettings(dim=DIM, exact_below=100, hnsw_ef_search=512, regraph_share=0.25)
DISTINCT, COPIES = 300, 3


def unit_vectors(n, seed):
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def settle(part):
    steps = 0
    while part.backlog:
        part.index_step(64)
        steps += 1
        assert steps < 10000, "the indexer's work does not shrink"


def repeated(settings=SETTINGS):
    """Return a partition where rowids i, i + 300 and i + 600 share a vector (created: position)."""
    base = unit_vectors(DISTINCT, 0)
    vectors = np.concatenate([base] * COPIES)
    part = Partition(settings)
    part.add(np.arange(1, len(vectors) + 1), vectors, np.arange(len(vectors), dtype=np.float64))
    settle(part)
    return part, base


def copies_of(i):
    return {i + 1 + DISTINCT * c for c in range(COPIES)}


def assert_answers_as_exact(part, queries, k=10):
    """Tied rows may come back in any order: the similarities must match exact search's."""
    for q in queries:
        for history in (False, True):
            got, got_sims = part.search(q, k, include_hidden=history)
            want, want_sims = part.search(q, k, include_hidden=history, exact=True)
            assert len(set(got.tolist())) == len(got), "a row came back twice"
            assert np.allclose(np.sort(got_sims), np.sort(want_sims), atol=1e-5)


def test_copies_share_one_node_and_each_is_returned():
    part, base = repeated()
    assert part.hnsw.ntotal == DISTINCT and part.indexed == DISTINCT * COPIES and part.tail == 0
    rowids, sims = part.search(base[5], COPIES)
    assert set(rowids.tolist()) == copies_of(5) and np.allclose(sims, 1.0, atol=1e-5)
    assert_answers_as_exact(part, unit_vectors(20, 1))


def test_each_copy_keeps_its_own_supersession_deletion_and_time():
    part, base = repeated()
    first, second, third = sorted(copies_of(5))
    part.set_hidden(first, True)
    part.set_hidden(second, True)
    assert part.search(base[5], 1)[0].tolist() == [third]
    assert set(part.search(base[5], COPIES, include_hidden=True)[0].tolist()) == copies_of(5)
    part.remove(third)  # the last current copy: the node is no longer current
    top, sims = part.search(base[5], 1)
    assert top[0] not in copies_of(5) and sims[0] < 0.999
    assert set(part.search(base[5], 2, include_hidden=True)[0].tolist()) == {first, second}
    part.set_hidden(first, False)  # current again: its shared node is current again
    assert part.search(base[5], 1)[0].tolist() == [first]
    # created at its row position: only the copy made since 200 passes the filter
    assert part.search(base[5], 1, since=200.0, include_hidden=True)[0].tolist() == [second]
    assert_answers_as_exact(part, unit_vectors(20, 2))


def test_a_rebuild_keeps_copies_together_and_superseded_ones_go_to_history():
    part, base = repeated()
    for i in range(100):  # every copy of a third of the vectors: past the rebuild share
        for rowid in copies_of(i):
            part.set_hidden(rowid, True)
    assert part.regraph_due()
    settle(part)
    assert part.hnsw.ntotal == 200 and part.indexed == DISTINCT * COPIES
    assert part._history.index.ntotal == 100  # their copies share nodes there too
    assert set(part.search(base[5], COPIES, include_hidden=True)[0].tolist()) == copies_of(5)
    assert set(part.search(base[150], COPIES)[0].tolist()) == copies_of(150)
    assert_answers_as_exact(part, unit_vectors(20, 3))


def test_saved_graphs_keep_their_copies_and_a_stale_twins_file_is_refused(tmp_path):
    part, base = repeated()
    path = tmp_path / "graph.faiss"
    part.save_graph(path)

    def reopened():
        again = Partition(SETTINGS)
        rowids = np.arange(1, DISTINCT * COPIES + 1)
        again.add(rowids, np.concatenate([base] * COPIES), rowids - 1.0)
        return again

    again = reopened()
    assert again.load_graph(path) and again.tail == 0 and again.hnsw.ntotal == DISTINCT
    assert set(again.search(base[7], COPIES)[0].tolist()) == copies_of(7)
    assert_answers_as_exact(again, unit_vectors(20, 4))

    twins_file = path.with_suffix(".twins.npy")
    saved = np.load(twins_file)
    saved[0] += 1  # as if left beside a graph of another size by a crash
    np.save(twins_file, saved)
    assert not reopened().load_graph(path)


def test_unequal_vectors_never_share_a_node_whatever_their_keys(monkeypatch):
    def one_key(vectors):
        return np.zeros(len(vectors), dtype=np.uint64)

    monkeypatch.setattr(graph_module, "vector_keys", one_key)
    monkeypatch.setattr(twins_module, "vector_keys", one_key)
    a, b = unit_vectors(2, 5)
    vectors = np.stack([a, b, a, b])
    firsts, twins, twin_of, _ = twins_module.group_identical(lambda rows: vectors[rows],
                                                             np.arange(4))
    assert firsts.tolist() == [0, 1, 3] and twins.tolist() == [2] and twin_of.tolist() == [0]
    part, base = repeated()  # every vector collides with every other
    assert part.hnsw.ntotal >= DISTINCT
    assert set(part.search(base[9], COPIES)[0].tolist()) == copies_of(9)
    assert_answers_as_exact(part, unit_vectors(20, 6))


@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_copies_share_nodes_in_either_ram_precision(precision):
    settings = IndexSettings(dim=DIM, exact_below=100, hnsw_ef_search=512,
                             ram_precision=precision, training_rows=300)
    part, base = repeated(settings)
    assert part.hnsw.ntotal == DISTINCT
    assert set(part.search(base[11], COPIES)[0].tolist()) == copies_of(11)
