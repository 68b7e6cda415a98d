"""A planner backed by any OpenAI-compatible chat endpoint.

Any of vLLM, llama.cpp's server, Ollama or a hosted API. The prompt carries the memory prompt
(``core.prompt``), the last K steps, the current observation and the valid actions; the answer is
mapped to one valid action. Bounded: a timeout per request and a fixed number of retries with
backoff.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from brainmem_ros.planning.base import PlannerError, PlanningContext, closest_action

__all__ = ["LLMPlanner", "build_messages", "scoring_prompt", "mean_logprob"]

_TRANSPORT = (urllib.error.URLError, TimeoutError, OSError, ValueError)

SYSTEM = (
    "You control a household robot. Each turn you get memories, the task, the recent steps, what "
    "the "
    "robot sees now and the actions it may take. Answer with exactly one line: ACTION: <one of the "
    "valid actions, copied exactly>.")


def build_messages(context: PlanningContext) -> list[dict]:
    steps = "\n".join(f"> {a}\n{o}" for a, o in context.window) or "(none yet)"
    user = (f"{context.memory_prompt}\n\nTask: {context.task}\n\nRecent steps:\n{steps}\n\n"
            f"Now you see: {context.observation}\n\nValid actions:\n" +
            "\n".join(f"- {a}" for a in context.valid_actions) + "\n\nYour answer (ACTION: ...):")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def scoring_prompt(context: PlanningContext) -> str:
    """Write the chat as one text that ends where the action goes (for scoring actions)."""
    system, user = (m["content"] for m in build_messages(context))
    return f"{system}\n\n{user}\nACTION:"


def mean_logprob(logprobs: dict, start: int, end: int) -> float:
    """Mean log-probability of the tokens that begin inside [start, end) of the echoed text."""
    pairs = zip(logprobs["token_logprobs"], logprobs["text_offset"])
    values = [lp for lp, offset in pairs if start <= offset < end and lp is not None]
    if not values:
        raise PlannerError("the server returned no log-probabilities for the action")
    return sum(values) / len(values)


@dataclass
class LLMPlanner:
    """Free generation mapped to a valid action, or (``choose="score"``) SayCan-style scoring.

    Scoring asks the server for the log-probability of each valid action written after the prompt
    and takes the best by mean log-probability per token, so long actions are not penalised for
    their length and the answer is always a valid action.
    """

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout_s: float = 30.0
    retries: int = 2
    temperature: float = 0.0
    choose: str = ""
    name: str = "llm"

    def __post_init__(self):
        self.base_url = (self.base_url or os.environ.get("BRAINMEM_LLM_BASE_URL", "")).rstrip("/")
        self.model = self.model or os.environ.get("BRAINMEM_LLM_MODEL", "")
        self.api_key = self.api_key or os.environ.get("BRAINMEM_LLM_API_KEY",
                                                      os.environ.get("OPENAI_API_KEY", ""))
        self.choose = self.choose or os.environ.get("BRAINMEM_LLM_CHOOSE", "generate")
        if self.choose not in ("generate", "score"):
            raise PlannerError(f"choose must be generate or score, got {self.choose!r}")
        if not self.base_url or not self.model:
            raise PlannerError(
                "the LLM planner needs a base URL and a model (parameters llm.base_url and "
                "llm.model, or BRAINMEM_LLM_BASE_URL and BRAINMEM_LLM_MODEL)")

    def _request(self, path: str, payload: dict) -> dict:
        """POST once; the parsed answer (transport and JSON errors propagate)."""
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}{path}", json.dumps(payload).encode(),
                                         headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return json.loads(response.read())

    def _backoff(self, attempt: int) -> None:
        if attempt:
            time.sleep(min(4.0, 0.5 * 2**(attempt - 1)))

    def _post(self, path: str, payload: dict) -> dict:
        """POST with bounded retries; the parsed answer, or PlannerError naming the last error."""
        last = "no attempt"
        for attempt in range(self.retries + 1):
            self._backoff(attempt)
            try:
                return self._request(path, payload)
            except _TRANSPORT as exc:
                last = f"{type(exc).__name__}: {exc}"
        raise PlannerError(f"the LLM at {self.base_url} did not answer after "
                           f"{self.retries + 1} tries: {last}")

    def _score(self, context: PlanningContext) -> str:
        if not context.valid_actions:
            raise PlannerError("the environment offers no valid action")
        prompt = scoring_prompt(context)
        best, best_score = "", float("-inf")
        for action in context.valid_actions:
            text = f"{prompt} {action}"
            answer = self._post("/completions", {
                "model": self.model, "prompt": text, "max_tokens": 1, "echo": True,
                "logprobs": 1, "temperature": 0.0})
            try:
                logprobs = answer["choices"][0]["logprobs"]
            except (KeyError, IndexError, TypeError):
                raise PlannerError("the server's completion carries no log-probabilities "
                                   "(does it support echo and logprobs?)") from None
            score = mean_logprob(logprobs, len(prompt), len(text))
            if score > best_score:
                best, best_score = action, score
        return best

    def decide(self, context: PlanningContext) -> str:
        if self.choose == "score":
            return self._score(context)
        payload = {"model": self.model, "messages": build_messages(context),
                   "temperature": self.temperature, "max_tokens": 64}
        last = "no attempt"
        for attempt in range(self.retries + 1):
            self._backoff(attempt)
            try:
                answer = self._request("/chat/completions",
                                       payload)["choices"][0]["message"]["content"]
            except (*_TRANSPORT, KeyError, IndexError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            line = next(
                (ln for ln in answer.splitlines() if ln.strip().upper().startswith("ACTION:")),
                answer)
            try:
                return closest_action(
                    line.split(":", 1)[1].strip() if ":" in line else line.strip(),
                    context.valid_actions)
            except PlannerError as exc:
                last = str(exc)
        raise PlannerError(
            f"the LLM at {self.base_url} gave no usable action after {self.retries + 1} tries: "
            f"{last}")
