"""A small language model in this process, choosing by log-probability (SayCan-style scoring).

The prompt is evaluated once per step; each valid action is then scored from the model's state
after the prompt, token by token, by its mean log-probability per token, and the best is taken.
The key-value cache keeps the prompt's common prefix from one step to the next. This is what makes
scoring affordable: llama.cpp's OpenAI-compatible server can score an action too (``LLMPlanner``
with ``choose="score"``), but it returns log-probabilities for the whole echoed prompt on every
request, so a step costs one full prompt per valid action there.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from brainmem_ros.planning.base import PlannerError, PlanningContext
from brainmem_ros.planning.llm import scoring_prompt

__all__ = ["LocalScoringPlanner"]


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


class LocalScoringPlanner:
    """Score every valid action with a GGUF model loaded by llama-cpp-python; pick the best."""

    name = "llm"

    def __init__(self, model: str, threads: int = 0, context: int = 4096):
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise PlannerError("llama-cpp-python is not installed (make llm)") from exc
        from brainmem_ros.planning.llm_server import model_file

        self.model = model
        threads = threads or len(os.sched_getaffinity(0))  # the cores this process may use
        self.llm = Llama(model_path=str(model_file(model)), n_ctx=context, n_threads=threads,
                         logits_all=True, verbose=False)
        self._prompt: list[int] = []

    def _evaluate(self, tokens: list[int]) -> None:
        """Bring the cache to exactly ``tokens``, keeping the prefix shared with the last prompt."""
        if len(tokens) >= self.llm.n_ctx():
            raise PlannerError(f"the prompt ({len(tokens)} tokens) does not fit the model's "
                               f"context of {self.llm.n_ctx()}")
        keep = 0
        for old, new in zip(self._prompt, tokens):
            if old != new:
                break
            keep += 1
        keep = min(keep, len(tokens) - 1)  # the last prompt token is evaluated again: its logits
        self.llm.n_tokens = keep
        self.llm.eval(tokens[keep:])
        self._prompt = list(tokens)

    def score(self, context: PlanningContext) -> dict[str, float]:
        """Return every valid action's mean log-probability per token after the prompt."""
        tokens = self.llm.tokenize(scoring_prompt(context).encode(), add_bos=True, special=True)
        self._evaluate(tokens)
        base = len(tokens)
        first = _log_softmax(np.asarray(self.llm.scores[base - 1], dtype=np.float64))
        scores = {}
        for action in context.valid_actions:
            ids = self.llm.tokenize(f" {action}".encode(), add_bos=False, special=False)
            if not ids:
                continue
            logprobs = [first[ids[0]]]
            self.llm.n_tokens = base
            for i, token in enumerate(ids[:-1]):
                self.llm.eval([token])
                row = np.asarray(self.llm.scores[base + i], dtype=np.float64)
                logprobs.append(_log_softmax(row)[ids[i + 1]])
            scores[action] = float(np.mean(logprobs))
        self.llm.n_tokens = base  # the prompt's cache stays; the actions' tokens are dropped
        self._prompt = list(tokens)
        return scores

    def decide(self, context: PlanningContext) -> str:
        if not context.valid_actions:
            raise PlannerError("the environment offers no valid action")
        scores = self.score(context)
        best: Optional[str] = max(scores, key=scores.get) if scores else None
        if best is None:
            raise PlannerError("no valid action could be scored")
        return best
