"""planner_node: an example client that asks /retrieve_memory before each action.

Each step: retrieve memories for what it sees (with the task as context), let the decision backend
choose among the valid actions, execute it through the environment's EnvStep service, and publish
what it did and saw to the memory topics. Goals are pushed and finished through /brainmem/update_goal,
so consolidation learns procedures and failures. Backends plug in by name (``BACKENDS``).
"""
from __future__ import annotations

import sys
import threading
from collections import deque

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.errors import BrainMemError
from brainmem_ros.msg import ActionResult, Goal as GoalMsg, Observation
from brainmem_ros.nodes.parameters import declare
from brainmem_ros.nodes.runtime import call_and_wait, run
from brainmem_ros.planning.base import PlannerError, PlanningContext
from brainmem_ros.planning.llm import LLMPlanner
from brainmem_ros.srv import EnvStep, GetWorkingMemory, RetrieveMemory, UpdateGoal

__all__ = ["PlannerNode", "BACKENDS", "main"]


def _llm(node: "PlannerNode"):
    return LLMPlanner(node.llm_base_url, node.llm_model, timeout_s=node.llm_timeout_s, retries=node.llm_retries)


BACKENDS = {"llm": _llm}


class PlannerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("planner_node", **kwargs)
        self.agent_id = declare(self, "agent_id", "robot", "the agent this planner acts for")
        self.env_service = declare(self, "env_service", "/kitchen/step", "EnvStep service of the environment")
        backend = declare(self, "backend", "llm", f"decision backend, one of {', '.join(BACKENDS)}")
        self.use_memory = declare(self, "use_memory", True, "call /retrieve_memory before each action")
        self.window = declare(self, "window", 5, "steps of history the backend sees", 0, 1000)
        self.max_steps = declare(self, "max_steps", 100, "step budget per episode", 1, 100000)
        self.episodes = declare(self, "episodes", 1, "episodes to run, then idle", 0, 100000)
        self.top_k = declare(self, "top_k", 5, "memories asked for per step", 1, 50)
        self.call_timeout_s = declare(self, "call_timeout_s", 30.0, "wait for any service answer, seconds", 0.1, 600.0)
        self.llm_base_url = declare(self, "llm.base_url", "", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
        self.llm_model = declare(self, "llm.model", "", "model name the endpoint serves")
        self.llm_timeout_s = declare(self, "llm.timeout_s", 30.0, "timeout of one chat request, seconds", 0.1, 600.0)
        self.llm_retries = declare(self, "llm.retries", 2, "retries of a failed chat request", 0, 10)
        if backend not in BACKENDS:
            raise BrainMemError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")
        self.planner = BACKENDS[backend](self)
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        self.observations = self.create_publisher(Observation, "/brainmem/observation", qos)
        self.actions = self.create_publisher(ActionResult, "/brainmem/action_result", qos)
        self.env = self.create_client(EnvStep, self.env_service)
        self.retrieve = self.create_client(RetrieveMemory, "/retrieve_memory")
        self.goals = self.create_client(UpdateGoal, "/brainmem/update_goal")
        self.working = self.create_client(GetWorkingMemory, "/brainmem/get_working_memory")
        self.results: list[dict] = []
        self._stop = threading.Event()
        self.worker = threading.Thread(target=self._run_episodes, name="planner", daemon=True)
        self.worker.start()

    def _call(self, client, request):
        if not client.wait_for_service(timeout_sec=self.call_timeout_s):
            raise PlannerError(f"{client.srv_name} is not available")
        response = call_and_wait(client, request, self.call_timeout_s)
        if response is None:
            raise PlannerError(f"{client.srv_name} gave no answer in {self.call_timeout_s} s")
        return response

    def _run_episodes(self) -> None:
        for episode in range(self.episodes):
            if self._stop.is_set():
                return
            try:
                self.results.append(self.run_episode())
                self.get_logger().info(f"episode {episode}: {self.results[-1]}")
            except BrainMemError as exc:
                self.get_logger().error(f"episode {episode} stopped: {exc}")
                self.results.append({"error": str(exc)})

    def run_episode(self) -> dict:
        step = self._call(self.env, EnvStep.Request(agent_id=self.agent_id, action=""))
        if not step.success:
            raise PlannerError(f"the environment refused to reset: {step.message}")
        goal = self._call(self.goals, UpdateGoal.Request(operation=UpdateGoal.Request.OP_PUSH,
                                                        goal=GoalMsg(agent_id=self.agent_id, description=step.task)))
        history: deque = deque(maxlen=max(1, self.window))
        self._publish_observation(step.observation)
        steps = 0
        while not step.done and steps < self.max_steps and not self._stop.is_set():
            memory_prompt = ""
            if self.use_memory:
                answer = self._call(self.retrieve, RetrieveMemory.Request(
                    agent_id=self.agent_id, query=step.observation[-2000:], context=step.task,
                    top_k=self.top_k, include_working=True))
                memory_prompt = answer.memory_prompt if answer.success else ""
            action = self.planner.decide(PlanningContext(step.task, step.observation, list(step.valid_actions),
                                                         list(history) if self.window else [], memory_prompt))
            step = self._call(self.env, EnvStep.Request(agent_id=self.agent_id, action=action))
            steps += 1
            history.append((action, step.observation))
            self.actions.publish(ActionResult(agent_id=self.agent_id, action=action,
                                              success=step.success and not step.task_failed,
                                              result=step.observation, goal_id=goal.goal.id))
            self._publish_observation(step.observation)
        if steps:
            self._await_ingested(history[-1][0])
        op = UpdateGoal.Request.OP_COMPLETE if step.task_success else UpdateGoal.Request.OP_FAIL
        self._call(self.goals, UpdateGoal.Request(operation=op, goal=GoalMsg(agent_id=self.agent_id, id=goal.goal.id)))
        return {"task": step.task, "steps": steps, "success": bool(step.task_success), "failed": bool(step.task_failed)}

    def _await_ingested(self, last_action: str) -> None:
        """Finish a goal only once the store has the episode's last action (it travels through the
        encoder), so consolidation learns from the whole sequence. Bounded by call_timeout_s."""
        deadline = threading.Event()
        timer = threading.Timer(self.call_timeout_s, deadline.set)
        timer.start()
        try:
            while not deadline.is_set() and not self._stop.is_set():
                wm = self._call(self.working, GetWorkingMemory.Request(agent_id=self.agent_id))
                if wm.success and wm.recent_actions and wm.recent_actions[-1].action == last_action:
                    return
                deadline.wait(0.05)
            self.get_logger().warning("the store did not show the last action in time; finishing the goal anyway")
        finally:
            timer.cancel()

    def _publish_observation(self, text: str) -> None:
        if text.strip():
            self.observations.publish(Observation(agent_id=self.agent_id, text=text[:4000], source="environment",
                                                  confidence=1.0))

    def close(self) -> None:
        self._stop.set()
        self.worker.join(timeout=self.call_timeout_s)


def main(args=None) -> int:
    return run([PlannerNode], args)


if __name__ == "__main__":
    sys.exit(main())
