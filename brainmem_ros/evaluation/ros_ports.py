"""The episode's environment and memory over ROS.

EnvStep to kitchen_sim_node, the memory topics and services to the memory nodes. Used by
planner_node from its worker thread (an executor spins the node elsewhere); every call is bounded by
``timeout_s``.
"""
from __future__ import annotations

import time
import uuid
from typing import Sequence

from brainmem_ros.nodes import names
from brainmem_ros.core.errors import BrainMemError
from brainmem_ros.kitchen.base import EnvState
from brainmem_ros.core.prompt import TaskState, render_merged, splice_task_section

__all__ = ["RosEnvironment", "RosMemory", "RosCallError"]


class RosCallError(BrainMemError):
    """A service did not come up or did not answer in time, or refused the request."""


# A request that may be received twice is sent again when no answer came within this long (a
# server can drop its first answer to a client it has not fully discovered: runtime.call_and_wait).
RESEND_S = 5.0


def _call(client, request, timeout_s: float, resend: bool = True):
    from brainmem_ros.nodes.runtime import call_and_wait

    if not client.wait_for_service(timeout_sec=timeout_s):
        raise RosCallError(f"{client.srv_name} is not available")
    response = call_and_wait(client, request, timeout_s, RESEND_S if resend else None)
    if response is None:
        raise RosCallError(f"{client.srv_name} gave no answer in {timeout_s} s")
    if hasattr(response, "success") and not response.success:
        raise RosCallError(f"{client.srv_name} refused: {response.message}")
    return response


class RosEnvironment:

    def __init__(self, node, agent_id: str, service: str = names.KITCHEN_STEP,
                 timeout_s: float = 30.0):
        from brainmem_ros.srv import EnvStep

        self.EnvStep, self.agent_id, self.timeout_s = EnvStep, agent_id, timeout_s
        self.client = node.create_client(EnvStep, service)

    def _state(self, r) -> EnvState:
        return EnvState(r.task, r.observation, list(r.valid_actions), r.done, r.task_success,
                        r.task_failed, {
                            "failure": r.failure,
                            "interrupted": r.interrupted,
                            "timer_handled": r.interruption_handled,
                            "location": r.location
                        })

    def reset(self, seed: int) -> EnvState:
        return self._state(
            _call(self.client, self.EnvStep.Request(agent_id=self.agent_id, reset=True, seed=seed),
                  self.timeout_s))

    def step(self, action: str) -> EnvState:
        # An action is never sent twice; the episode's first call, the reset, may be.
        return self._state(
            _call(self.client, self.EnvStep.Request(agent_id=self.agent_id, action=action),
                  self.timeout_s, resend=False))


class RosMemory:
    """The memory nodes as an episode's MemoryPort.

    ``record`` publishes the action result and, so that the next recall sees it exactly as the in-
    process memory would, waits until the store shows it (bounded).
    """

    def __init__(self, node, agent_id: str, top_k: int = 5, prompt_limit: int = 16,
                 timeout_s: float = 30.0, language: str = "en", sync: bool = True):
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        from brainmem_ros.msg import ActionResult, Observation
        from brainmem_ros.srv import Consolidate, GetWorkingMemory, RetrieveMemory, UpdateGoal

        self.node, self.agent_id = node, agent_id
        self.top_k, self.prompt_limit = top_k, prompt_limit
        self.timeout_s, self.language, self.sync = timeout_s, language, sync
        self.msg = {"ActionResult": ActionResult, "Observation": Observation}
        self.srv = {
            "RetrieveMemory": RetrieveMemory,
            "UpdateGoal": UpdateGoal,
            "Consolidate": Consolidate,
            "GetWorkingMemory": GetWorkingMemory
        }
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.actions = node.create_publisher(ActionResult, names.ACTION_RESULT, qos)
        self.observations = node.create_publisher(Observation, names.OBSERVATION, qos)
        self.retrieve = node.create_client(RetrieveMemory, names.RETRIEVE_MEMORY)
        self.goals = node.create_client(UpdateGoal, names.UPDATE_GOAL)
        self.consolidate = node.create_client(Consolidate, names.CONSOLIDATE)
        self.working = node.create_client(GetWorkingMemory, names.GET_WORKING_MEMORY)
        self.started = 0.0
        self.goal_id = ""
        self._clock = node.get_clock()
        self._last_stamp = 0.0

    def _now(self) -> float:
        """Return the node's time (simulated time under use_sim_time), as the store stamps it."""
        return self._clock.now().nanoseconds / 1e9

    def _goal(self, op: int, description: str = "", goal_id: str = "", temporary: bool = False,
              fresh_world: bool = False):
        from brainmem_ros.msg import Goal

        UpdateGoal = self.srv["UpdateGoal"]
        push = op == UpdateGoal.Request.OP_PUSH
        # A push names its goal, so that a resent push is recognised and answered, not repeated.
        request = UpdateGoal.Request(
            operation=op, goal=Goal(agent_id=self.agent_id,
                                    id=f"goal-{uuid.uuid4().hex[:12]}" if push else goal_id,
                                    description=description, temporary=temporary),
            fresh_world=fresh_world)
        return _call(self.goals, request, self.timeout_s, resend=push).goal

    def begin(self, task: str) -> str:
        self.started = self._now()
        self.goal_id = self._goal(self.srv["UpdateGoal"].Request.OP_PUSH, task, fresh_world=True).id
        return self.goal_id

    def interrupt(self, description: str) -> str:
        return self._goal(self.srv["UpdateGoal"].Request.OP_PUSH, description, temporary=True).id

    def resolve(self, goal_id: str) -> None:
        self._goal(self.srv["UpdateGoal"].Request.OP_COMPLETE, goal_id=goal_id)
        self._consolidate(goal_id, True)

    def _send(self, publisher, msg) -> float:
        """Publish with a stamp after the last one's, and return the stamp.

        Publish with a stamp after the last one's and return it: the store is asked for this stamp,
        not for the text, which repeats (moving north twice, coming back to a room). Nothing is
        published before a subscriber has matched: a volatile topic gives nobody what was sent
        before it was discovered.
        """
        from brainmem_ros.nodes.conversions import to_time
        from brainmem_ros.nodes.runtime import wait_for_subscriber

        if not wait_for_subscriber(publisher, self.timeout_s, every_s=0.01):
            raise RosCallError(f"nobody subscribed to {publisher.topic_name} within "
                               f"{self.timeout_s} s")
        self._last_stamp = max(self._now(), self._last_stamp + 1e-3)
        msg.header.stamp = to_time(self._last_stamp)
        publisher.publish(msg)
        return self._last_stamp

    def record(self, action: str, result: str, success: bool, location: str = "") -> None:
        from brainmem_ros.nodes.conversions import from_time

        stamp = self._send(
            self.actions, self.msg["ActionResult"](agent_id=self.agent_id, action=action,
                                                   success=success, result=result[:4000],
                                                   location=location))
        if self.sync:
            self._await(lambda wm: from_time(wm.newest_event) >= stamp - 1e-6)

    def observe(self, text: str) -> None:
        from brainmem_ros.nodes.conversions import from_time

        if not text.strip():
            return
        stamp = self._send(
            self.observations, self.msg["Observation"](agent_id=self.agent_id, text=text[:4000],
                                                       source="environment", confidence=1.0))
        if self.sync:
            self._await(lambda wm: from_time(wm.newest_event) >= stamp - 1e-6)

    def _await(self, seen) -> None:
        GetWorkingMemory = self.srv["GetWorkingMemory"]
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            wm = _call(self.working, GetWorkingMemory.Request(agent_id=self.agent_id,
                                                              max_traces=1), self.timeout_s)
            if seen(wm):
                return
            time.sleep(0.005)
        raise RosCallError(
            f"the store did not show the agent's last event within {self.timeout_s} s")

    def recall(self, queries: Sequence[str], context: str) -> str:
        from brainmem_ros.nodes.conversions import recall_from_msg

        RetrieveMemory = self.srv["RetrieveMemory"]
        results, state_prompt = [], ""
        for query in queries:
            r = _call(
                self.retrieve,
                RetrieveMemory.Request(agent_id=self.agent_id, query=query[:4000], context=context,
                                       top_k=self.top_k, since=self.started),
                self.timeout_s)
            results.append(([recall_from_msg(m) for m in r.memories], list(r.warnings)))
            state_prompt = state_prompt or r.memory_prompt
        merged = render_merged(results, TaskState(), self._now(), self.language, self.prompt_limit)
        return splice_task_section(merged, state_prompt, self.language)

    def end(self, goal_id: str, success: bool) -> None:
        Request = self.srv["UpdateGoal"].Request
        self._goal(Request.OP_COMPLETE if success else Request.OP_FAIL, goal_id=goal_id)
        self._consolidate(goal_id, success)

    def _consolidate(self, goal_id: str, success: bool) -> None:
        """Learn from a finished goal before the next step.

        As the in-process memory does inside finish_goal. consolidation_node asks too, on the goal
        event, and may be first; waiting for it instead would let the next recall race its answer.
        """
        Consolidate = self.srv["Consolidate"]
        try:
            _call(
                self.consolidate,
                Consolidate.Request(agent_id=self.agent_id,
                                    reason="goal_completed" if success else "goal_failed",
                                    goal_id=goal_id), self.timeout_s)
        except RosCallError as exc:
            if "has not finished" not in str(exc):  # a store restarted since the goal ended
                raise
