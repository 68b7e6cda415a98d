"""`brainmem-ros bench` runs end to end on a small store and reports every promised key."""
import json

import pytest

from brainmem_ros.bench.core import format_table, run_bench
from brainmem_ros.bench.corpus import make_corpus

pytestmark = pytest.mark.model

KEYS = {"retrieve_p50_ms", "retrieve_p99_ms", "retrieve_no_embed_p99_ms", "recall_at_10", "ingest_per_s",
        "ingest_preembedded_per_s", "forget_pass_s", "bytes_per_entry"}


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
    assert list((tmp_path / "cache").glob("emb-300-*.npy")), "embeddings are cached on disk"
