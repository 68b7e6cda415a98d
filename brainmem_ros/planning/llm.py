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

__all__ = ["LLMPlanner", "build_messages"]

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


@dataclass
class LLMPlanner:
    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout_s: float = 30.0
    retries: int = 2
    temperature: float = 0.0
    name: str = "llm"

    def __post_init__(self):
        self.base_url = (self.base_url or os.environ.get("BRAINMEM_LLM_BASE_URL", "")).rstrip("/")
        self.model = self.model or os.environ.get("BRAINMEM_LLM_MODEL", "")
        self.api_key = self.api_key or os.environ.get("BRAINMEM_LLM_API_KEY",
                                                      os.environ.get("OPENAI_API_KEY", ""))
        if not self.base_url or not self.model:
            raise PlannerError(
                "the LLM planner needs a base URL and a model (parameters llm.base_url and "
                "llm.model, or BRAINMEM_LLM_BASE_URL and BRAINMEM_LLM_MODEL)")

    def decide(self, context: PlanningContext) -> str:
        body = json.dumps({
            "model": self.model,
            "messages": build_messages(context),
            "temperature": self.temperature,
            "max_tokens": 64
        }).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(4.0, 0.5 * 2**(attempt - 1)))
            request = urllib.request.Request(f"{self.base_url}/chat/completions", body, headers,
                                             method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    answer = json.loads(response.read())["choices"][0]["message"]["content"]
            except (urllib.error.URLError, TimeoutError, OSError, KeyError, IndexError,
                    ValueError) as exc:
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
