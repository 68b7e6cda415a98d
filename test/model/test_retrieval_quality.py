"""Retrieval quality with the real all-MiniLM-L6-v2 on the labelled kitchen run.

Retrieval quality with the real all-MiniLM-L6-v2 on the labelled kitchen run: the fused pipeline
recalls more than vector search alone, and never returns a stale fact; with the float model and with
its int8 form alike.
"""
import pytest

from brainmem_ros.core.embedding import MiniLMEmbedder
from brainmem_ros.evaluation.retrieval_quality import evaluate_retrieval


@pytest.fixture(scope="module", params=["onnx", "onnx-int8"])
def evaluation(request, minilm):
    return evaluate_retrieval(minilm if request.param == "onnx" else MiniLMEmbedder(request.param),
                              k=5)


def test_fused_recall_beats_vector_recall(evaluation):
    assert evaluation.fused_recall > evaluation.vector_recall
    assert evaluation.fused_recall >= 0.9


def test_stale_facts_are_never_returned(evaluation):
    assert evaluation.fused_stale == []
    assert evaluation.vector_stale, "the set must hold stale facts a plain vector search falls for"


def test_answers_needing_recent_actions_and_exact_names(evaluation):
    by_query = {q["query"]: q for q in evaluation.per_question}
    assert by_query["what did I do last?"]["fused_recall"] == 1.0
    assert by_query["which model is the coffee machine, ZX-4410?"]["fused_recall"] == 1.0
