"""`brainmem-ros bench` runs end to end on a small store and reports every promised key."""
import json

import numpy as np
import pytest


from brainmem_ros.bench.core import FIRST_QUESTIONS, format_table, run_bench
from brainmem_ros.bench.corpus import cached_embeddings, make_corpus, make_questions
from brainmem_ros.bench.peers import format_peer_table

KEYS = {
    "retrieve_p50_ms", "retrieve_p99_ms", "retrieve_no_embed_p99_ms", "recall_at_10",
    "ingest_per_s", "ingest_preembedded_per_s", "forget_pass_s", "bytes_per_entry",
    "retrieve_first_ms", "retrieve_no_embed_first_ms"
}


def test_corpus_is_deterministic_with_overlapping_entities():
    a, b = make_corpus(500), make_corpus(500)
    assert [x.text for x in a] == [x.text for x in b]
    assert len({x.text for x in a}) > 400
    assert sum("fridge" in x.text for x in a) > 10


def test_bench_reports_every_key(minilm, tmp_path):
    report = run_bench([300], n_queries=20, json_path=tmp_path / "bench.json", embedder=minilm,
                       progress=False, cache_dir=tmp_path / "cache")
    figures = json.loads((tmp_path / "bench.json").read_text())["sizes"]["300"]
    assert KEYS <= set(figures)
    assert figures["recall_at_10"] == 1.0  # exact search at this size
    assert all(figures[k] > 0 for k in KEYS)
    assert "recall@10" in format_table(report)
    assert not set(FIRST_QUESTIONS) & set(
        make_questions(200)), "the first calls are none of the measured questions"
    assert list((tmp_path / "cache").glob("emb-300-*.npy")), "embeddings are cached on disk"


PEER_KEYS = {
    "query_filtered_p99_ms", "query_p99_ms", "recall", "ingest_preembedded_per_s", "bytes_per_entry"
}


def _peers_installed(*modules):
    """Skip, naming what is missing, where the optional peer stores are not installed."""
    for module in modules:
        pytest.importorskip(module, reason=f"{module} is not installed (make peers); a ROS install "
                            "via rosdep has no peer stores")


def test_peers_run_on_the_same_vectors_and_report_every_key(minilm, tmp_path):
    _peers_installed("chromadb", "qdrant_client")
    report = run_bench([400], n_queries=20, embedder=minilm, progress=False,
                       cache_dir=tmp_path / "cache", peers=("chromadb", "qdrant"))
    systems = report["systems"]
    assert set(systems) == {"brainmem", "chromadb", "qdrant"}
    for name, per_size in systems.items():
        figures = per_size["400"]
        assert PEER_KEYS <= set(figures), (name, figures)
        assert figures["recall"] >= 0.9, name  # each answers the filtered query with the right rows
        assert all(figures[k] > 0 for k in PEER_KEYS)
    assert systems["brainmem"]["400"]["recall"] == 1.0  # exact search while small
    assert "chromadb" in format_peer_table(systems)


def test_peers_above_the_size_limit_are_skipped_not_run(minilm, tmp_path):
    _peers_installed("qdrant_client")
    report = run_bench([300], n_queries=5, embedder=minilm, progress=False,
                       cache_dir=tmp_path / "cache", peers=("qdrant", ), peer_max_size=100)
    assert "skipped" in report["systems"]["qdrant"]["300"]
    assert "query_filtered_p99_ms" in report["systems"]["brainmem"]["300"]


def test_repeated_texts_are_embedded_once_and_laid_out_in_order(minilm, tmp_path):
    calls = []

    def embed(texts):
        calls.append(len(texts))
        return minilm.embed(texts)

    texts = [
        "the butter is in the fridge", "the mug is on the table", "the butter is in the fridge"
    ]
    vectors = cached_embeddings(texts, embed, tmp_path, progress=False)
    assert sum(calls) == 2
    assert np.array_equal(vectors[0], vectors[2]) and not np.array_equal(vectors[0], vectors[1])
    assert np.allclose(vectors[1], minilm.embed([texts[1]])[0], atol=1e-6)


def test_cli_refuses_an_unknown_peer():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "brainmem_ros.cli", "bench", "--peers", "pinecone"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "unknown peer" in out.stderr


def test_recall_counts_an_equally_close_neighbour_as_found():
    """The corpus repeats sentences: two rows with one vector are equally right answers."""
    from brainmem_ros.bench.peers import tie_aware_hits

    assert tie_aware_hits(np.array([0.9, 0.8, 0.8]), kth_exact=0.8, k=3) == 3  # a twin of the 3rd
    assert tie_aware_hits(np.array([0.9, 0.8, 0.7]), kth_exact=0.8,
                          k=3) == 2  # a worse one is a miss
    assert tie_aware_hits(np.array([0.9, 0.9, 0.9, 0.9]), kth_exact=0.8, k=3) == 3  # never above k
