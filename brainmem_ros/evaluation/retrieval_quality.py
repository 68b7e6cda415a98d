"""Retrieval quality on a labelled kitchen run: the fused pipeline against vector recall alone.

The run in ``data/retrieval_eval.yaml`` is fed through a real BrainMemory (so the memories are the
ones the system itself makes), then each question is asked twice: through the full pipeline, and as
a plain top-k cosine search over every stored memory and working trace (what a vector database on
its own would answer). Both answer with k memories: the pipeline's warnings come first within its
k, as they come first in its prompt. Reports recall@k and precision (the share of the k that
answers the question) of both, and every stale fact either returned. A label that no memory of the
run contains is a defect of the set, refused before any figure is made.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import yaml

from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.embedding import Embedder
from brainmem_ros.core.memory import BrainMemory
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import GoalStatus

__all__ = ["RetrievalEval", "evaluate_retrieval", "DATASET"]

DATASET = Path(__file__).resolve().parent / "data" / "retrieval_eval.yaml"


@dataclass
class RetrievalEval:
    k: int
    fused_recall: float
    vector_recall: float
    fused_precision: float = 0.0
    vector_precision: float = 0.0
    fused_stale: list = field(default_factory=list)
    vector_stale: list = field(default_factory=list)
    per_question: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "k": self.k,
            "fused_recall_at_k": self.fused_recall,
            "vector_recall_at_k": self.vector_recall,
            "fused_precision_at_k": self.fused_precision,
            "vector_precision_at_k": self.vector_precision,
            "fused_stale_returned": self.fused_stale,
            "vector_stale_returned": self.vector_stale,
            "questions": self.per_question
        }


def _feed(memory: BrainMemory, agent: str, events: list[dict]) -> None:
    for event in events:
        if "observe" in event:
            memory.observe(agent, event["observe"])
        elif "act" in event:
            memory.act(agent, event["act"], bool(event["ok"]), event.get("result", ""))
        elif "goal" in event:
            memory.push_goal(agent, event["goal"])
        elif event.get("complete"):
            memory.finish_goal(agent, "", GoalStatus.COMPLETED)
        elif event.get("fail"):
            memory.finish_goal(agent, "", GoalStatus.FAILED)
        elif event.get("consolidate"):
            memory.consolidate(agent)


def _recall(texts: list[str], relevant: list[str]) -> float:
    found = sum(any(label.lower() in t.lower() for t in texts) for label in relevant)
    return found / len(relevant)


def _precision(texts: list[str], relevant: list[str]) -> float:
    """Share of ``texts`` that contain one of the relevant labels (0 for no answer)."""
    useful = sum(any(label.lower() in t.lower() for label in relevant) for t in texts)
    return useful / len(texts) if texts else 0.0


def _first_k(texts: list[str], k: int) -> list[str]:
    return list(dict.fromkeys(texts))[:k]


def evaluate_retrieval(embedder: Embedder, k: int = 5, dataset: Path = DATASET,
                       config: Optional[MemoryConfig] = None) -> RetrievalEval:
    spec = yaml.safe_load(dataset.read_text(encoding="utf-8"))
    agent = spec["agent"]
    with tempfile.TemporaryDirectory(prefix="brainmem-eval-") as folder:
        config = (config or MemoryConfig()).replace(**{"store.path": f"{folder}/memory.db"})
        with BrainMemory(config, embedder=embedder) as memory:
            _feed(memory, agent, spec["events"])
            stored = memory.store.get(memory.store.ids())
            pool = [e.content
                    for e in stored] + [t.text for t in memory.working.agent(agent).traces]
            pool_vectors = np.stack([e.embedding for e in stored] +
                                    [t.embedding for t in memory.working.agent(agent).traces])
            missing = [(q["query"], label) for q in spec["questions"] for label in q["relevant"]
                       if not any(label.lower() in text.lower() for text in pool)]
            if missing:
                raise ValueError(f"labels no memory of the run contains: {missing}")
            fused_scores, vector_scores, fused_stale, vector_stale, rows = [], [], [], [], []
            precision: dict[str, list[float]] = {"fused": [], "vector": []}
            for q in spec["questions"]:
                result = memory.retrieve(
                    RetrievalRequest(agent, q["query"], context=q.get("context", ""), top_k=k))
                fused = _first_k(result.warnings + [r.entry.content for r in result.recalls], k)
                qv = embedder.embed([q["query"]])[0]
                naive = [pool[i] for i in np.argsort(-(pool_vectors @ qv))[:k]]
                f, v = _recall(fused, q["relevant"]), _recall(naive, q["relevant"])
                fused_scores.append(f)
                vector_scores.append(v)
                precision["fused"].append(_precision(fused, q["relevant"]))
                precision["vector"].append(_precision(naive, q["relevant"]))
                for label in q.get("stale", []):
                    fused_stale += [(q["query"], t) for t in fused if label.lower() in t.lower()]
                    vector_stale += [(q["query"], t) for t in naive if label.lower() in t.lower()]
                rows.append({
                    "query": q["query"],
                    "fused_recall": f,
                    "vector_recall": v,
                    "fused_precision": precision["fused"][-1],
                    "vector_precision": precision["vector"][-1],
                    "fused": fused,
                    "vector": naive
                })
    return RetrievalEval(k, float(np.mean(fused_scores)), float(np.mean(vector_scores)),
                         float(np.mean(precision["fused"])), float(np.mean(precision["vector"])),
                         fused_stale, vector_stale, rows)
