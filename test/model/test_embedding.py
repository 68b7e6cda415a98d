"""The embedding backends with the real all-MiniLM-L6-v2 weights.

The embedding backends with the real all-MiniLM-L6-v2 weights: ONNX Runtime gives the reference's
vectors (sentence-transformers on torch), the int8 graph gives vectors close to them, and a store
never mixes the two precisions.
"""
import numpy as np
import pytest

from brainmem_ros.core.embedding import MiniLMEmbedder
from brainmem_ros.core.errors import EmbedderUnavailable, StoreUnavailable

TEXTS = [
    "You open the fridge. Inside: butter, milk and a jar of jam.",
    "the butter is on the counter",
    "You put the tomato on the bread (success).",
    "Warning: pouring water into the coffee machine while it is on short-circuits it!",
    "where did I leave the knife?",
    "A timer rings in the living room.",
    "which model is the coffee machine, ZX-4410?",
    "go north",
    "The kitchen. Exits: north, east. You see a counter, a sink and a stove.",
    "you are holding the cutting board",
    "冰箱里有黄油",
    "x" * 600,  # longer than the model's 128 tokens: truncated the same way by every backend
]


@pytest.fixture(scope="module")
def int8():
    return MiniLMEmbedder("onnx-int8")


def test_onnx_gives_the_reference_vectors(minilm):
    reference = MiniLMEmbedder("torch").embed(TEXTS)
    assert np.abs(minilm.embed(TEXTS) - reference).max() < 1e-4


def test_int8_vectors_are_unit_length_and_close_to_the_float_model(minilm, int8):
    full, quantised = minilm.embed(TEXTS), int8.embed(TEXTS)
    assert quantised.shape == (len(TEXTS), 384) and quantised.dtype == np.float32
    assert np.allclose(np.linalg.norm(quantised, axis=1), 1.0, atol=1e-5)
    cosine = (full * quantised).sum(axis=1)
    assert cosine.min() > 0.97 and cosine.mean() > 0.985
    assert not np.array_equal(full,
                              quantised), "the int8 backend must actually run the quantised graph"


def test_int8_keeps_the_nearest_memory(minilm, int8):
    """Every question's nearest memory is the same one under both precisions."""
    memories, questions = TEXTS[:4] + TEXTS[6:11], [
        "is there butter in the fridge?", "what did I put on the bread?",
        "is it safe to fill the coffee machine?", "what is the model number?", "what do I hold?"
    ]

    def nearest(embedder):
        return list((embedder.embed(questions) @ embedder.embed(memories).T).argmax(axis=1))

    assert nearest(int8) == nearest(minilm)


def test_a_store_keeps_the_precision_it_was_made_with(tmp_path, minilm, int8, make_memory):
    memory = make_memory(minilm, tmp_path / "memory.db")
    memory.close()
    with pytest.raises(StoreUnavailable, match=r"int8"):
        make_memory(int8, tmp_path / "memory.db")
    make_memory(minilm, tmp_path / "memory.db").close()


def test_an_unknown_backend_is_named_in_the_error():
    with pytest.raises(EmbedderUnavailable, match="onnx-int8"):
        MiniLMEmbedder("tensorrt")


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_a_single_text_gets_the_same_vector_on_its_own_thread(backend):
    """A single text gets the same vector on the caller's thread as in a batch.

    One text runs on the caller's thread beside other calls (a retrieval's question): the same text
    gets the same vector alone and from calls made at once from several threads. (The int8 graph
    scales its activations per pass, so there a text embedded among others differs slightly from the
    text alone; the float graph does not.)
    """
    from concurrent.futures import ThreadPoolExecutor

    embedder = MiniLMEmbedder(backend, threads=2)
    alone = np.stack([embedder.embed([text])[0] for text in TEXTS])
    with ThreadPoolExecutor(4) as pool:
        together = np.stack([v[0] for v in pool.map(lambda t: embedder.embed([t]), TEXTS * 3)])
    assert np.array_equal(together, np.concatenate([alone] * 3))
    if backend == "onnx":
        assert np.abs(alone - embedder.embed(TEXTS)).max() < 1e-5


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_passes_run_side_by_side_give_each_text_its_own_vector(backend):
    """Passes run side by side give every text its own vector.

    A batch's passes run on several workers at once: every row gets the vector its own text gets
    when the same passes run one after another, whatever order the texts came in.
    """
    texts = TEXTS * 4 + [
        f"the {thing} is on the {place}" for thing in ("cup", "knife", "jam")
        for place in ("counter", "shelf", "table", "stove")
    ]
    side_by_side, one_worker = MiniLMEmbedder(backend,
                                              threads=2), MiniLMEmbedder(backend, threads=1)
    assert len(side_by_side._sessions) == 2 and side_by_side._workers is not None
    shuffled = [texts[i] for i in np.random.default_rng(3).permutation(len(texts))]
    for batch in (texts, shuffled):
        assert np.array_equal(side_by_side.embed(batch), one_worker.embed(batch))
    if backend == "onnx":  # no per-pass scaling: a text's vector does not depend on its pass
        by_text = dict(zip(texts, one_worker.embed(texts)))
        assert np.abs(side_by_side.embed(shuffled) - np.stack([by_text[t]
                                                               for t in shuffled])).max() < 1e-5
