"""planner_node: an example client that asks /retrieve_memory before each action.

Each step: retrieve memories for what the planner wants to know (with the task as context), let the
decision backend choose among the valid actions, execute it through the environment's EnvStep
service, and publish what it did and saw to the memory topics. Goals go through
/brainmem/update_goal, so consolidation learns procedures and failures. The step loop is the
evaluation's own (``brainmem_ros.evaluation.episode``), so an episode over DDS is the same episode
as in-process. Backends plug in by name (``BACKENDS``).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

from rclpy.node import Node

from brainmem_ros.nodes import names
from brainmem_ros.core.errors import BrainMemError
from brainmem_ros.evaluation.episode import CONDITIONS, episode_agent, run_episode
from brainmem_ros.evaluation.ros_ports import RosEnvironment, RosMemory
from brainmem_ros.nodes.parameters import declare, guard_parameters
from brainmem_ros.nodes.runtime import run
from brainmem_ros.planning.llm import LLMPlanner
from brainmem_ros.planning.scripted import ScriptedPlanner

__all__ = ["PlannerNode", "BACKENDS", "main"]


def _llm(node: "PlannerNode"):
    return LLMPlanner(node.llm_base_url, node.llm_model, timeout_s=node.llm_timeout_s,
                      retries=node.llm_retries, choose=node.llm_choose)


BACKENDS = {"scripted": lambda node: ScriptedPlanner(), "llm": _llm}


def _seeds(text: str) -> list[int]:
    from brainmem_ros.evaluation.runner import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise BrainMemError(f"parameter seeds: {exc}") from exc


class PlannerNode(Node):

    def __init__(self, **kwargs):
        super().__init__("planner_node", **kwargs)
        self.agent_id = declare(
            self, "agent_id", "robot", "the agent this planner acts for; each seed acts as "
            "<agent_id>-s<seed> unless lifelong")
        self.env_service = declare(self, "env_service", names.KITCHEN_STEP,
                                   "EnvStep service of the environment")
        backend = declare(self, "backend", "scripted",
                          f"decision backend, one of {', '.join(BACKENDS)}")
        self.condition = declare(self, "condition", "brainmem",
                                 f"what the backend is shown: one of {', '.join(CONDITIONS)}")
        self.window = declare(self, "window", 5, "K: steps of history the backend sees", 0, 1000)
        self.max_steps = declare(self, "max_steps", 100, "step budget per episode", 1, 100000)
        self.seeds = _seeds(
            declare(self, "seeds", "0", "episodes to play, e.g. 0-4 or 1,4,7", any_type=True))
        self.attempts = declare(self, "attempts", 1, "attempts per seed, memory kept across them",
                                1, 1000)
        self.lifelong = declare(
            self, "lifelong", False, "every seed acts as agent_id itself, one memory across "
            "all of them (else one agent per seed)")
        self.top_k = declare(self, "top_k", 5, "memories asked for per question", 1, 50)
        self.call_timeout_s = declare(self, "call_timeout_s", 30.0,
                                      "wait for any service answer, seconds", 0.1, 600.0)
        self.results_file = declare(self, "results_file", "",
                                    "write the episode records here (JSON) when done")
        self.exit_when_done = declare(self, "exit_when_done", False,
                                      "stop the process after the last episode")
        self.llm_base_url = declare(self, "llm.base_url", "",
                                    "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
        self.llm_model = declare(self, "llm.model", "", "model name the endpoint serves")
        self.llm_timeout_s = declare(self, "llm.timeout_s", 30.0,
                                     "timeout of one chat request, seconds", 0.1, 600.0)
        self.llm_retries = declare(self, "llm.retries", 2, "retries of a failed chat request", 0,
                                   10)
        self.llm_choose = declare(
            self, "llm.choose", "generate", "generate: free text mapped to a valid action; score: "
            "each valid action scored by its mean log-probability (needs /completions with "
            "logprobs); anything else is refused at start")
        if backend not in BACKENDS:
            raise BrainMemError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")
        if self.condition not in CONDITIONS:
            raise BrainMemError(
                f"unknown condition {self.condition!r}; one of {', '.join(CONDITIONS)}")
        self.planner = BACKENDS[backend](self)
        self.results: list[dict] = []
        self._stop = threading.Event()
        self.worker = threading.Thread(target=self._run_episodes, name="planner", daemon=True)
        self.worker.start()
        guard_parameters(self)

    def _clock_started(self) -> bool:
        """Wait for time to exist (with use_sim_time, the first /clock message); False on close.

        The memory refuses calls before then, so an episode started earlier would only fail.
        """
        while not self._stop.is_set():
            if not self.get_parameter("use_sim_time").value or \
                    self.get_clock().now().nanoseconds > 0:
                return True
            self.get_logger().warning("use_sim_time is true and no /clock has arrived: waiting",
                                      throttle_duration_sec=10.0)
            self._stop.wait(0.1)
        return False

    def _run_episodes(self) -> None:
        if not self._clock_started():
            return
        for seed in self.seeds:
            agent = episode_agent(self.agent_id, seed, self.lifelong)
            env = RosEnvironment(self, agent, self.env_service, self.call_timeout_s)
            memory = RosMemory(self, agent, self.top_k, timeout_s=self.call_timeout_s) \
                if self.condition == "brainmem" else None
            for attempt in range(self.attempts):
                if self._stop.is_set():
                    return
                try:
                    record = run_episode(env, self.planner, self.condition, seed, self.window,
                                         self.max_steps, memory, attempt).to_dict()
                except BrainMemError as exc:
                    self.get_logger().error(f"seed {seed} attempt {attempt} stopped: {exc}")
                    record = {"seed": seed, "attempt": attempt, "error": str(exc)}
                self.results.append(record)
                outcome = "error" if "error" in record else "success" if record["success"] else \
                    f"failed ({record['failure']})" if record["failed"] else "out of steps"
                self.get_logger().info(f"episode seed={seed} attempt={attempt}: {outcome} "
                                       f"after {record.get('steps', 0)} steps")
                print(
                    f"EPISODE {json.dumps({'seed': seed, 'attempt': attempt, 'outcome': outcome})}",
                    flush=True)
        if self.results_file:
            Path(self.results_file).parent.mkdir(parents=True, exist_ok=True)
            Path(self.results_file).write_text(json.dumps(self.results))
        if self.exit_when_done:
            os.kill(os.getpid(), signal.SIGTERM)

    def close(self) -> None:
        self._stop.set()
        self.worker.join(timeout=self.call_timeout_s)


def main(args=None) -> int:
    return run([PlannerNode], args)


if __name__ == "__main__":
    sys.exit(main())
