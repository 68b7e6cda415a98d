"""The memory an in-process episode talks to: a BrainMemory in this process, no ROS."""
from __future__ import annotations

from typing import Sequence

from brainmem_ros.core.memory import BrainMemory
from brainmem_ros.core.prompt import render_merged
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import GoalStatus

__all__ = ["InProcessMemory"]


class InProcessMemory:
    """The episode's memory in this process, as planner_node's memory port does over ROS.

    Recall is limited to the current episode (``since`` its start): the state of an earlier
    attempt's world is not this one's. Warnings about earlier failures come regardless (the
    retriever's proactive warnings look at all of them).
    """

    started = 0.0
    last_recalled: list = []  # the entries the last recall returned, warnings too (fleet eval)

    def __init__(self, memory: BrainMemory, agent_id: str = "robot", top_k: int = 5,
                 prompt_limit: int = 16):
        self.memory, self.agent_id = memory, agent_id
        self.top_k, self.prompt_limit = top_k, prompt_limit

    def begin(self, task: str) -> str:
        self.started = self.memory.clock()
        return self.memory.push_goal(self.agent_id, task, fresh_world=True).id

    def interrupt(self, description: str) -> str:
        return self.memory.push_goal(self.agent_id, description, temporary=True).id

    def resolve(self, goal_id: str) -> None:
        self.memory.finish_goal(self.agent_id, goal_id, GoalStatus.COMPLETED)

    def record(self, action: str, result: str, success: bool, location: str = "") -> None:
        self.memory.act(self.agent_id, action, success, result, location=location)

    def observe(self, text: str) -> None:
        if text.strip():
            self.memory.observe(self.agent_id, text)

    def recall(self, queries: Sequence[str], context: str) -> str:
        results, recalled = [], []
        for query in queries:
            r = self.memory.retrieve(
                RetrievalRequest(self.agent_id, query, context=context, top_k=self.top_k,
                                 include_working=True, since=self.started))
            results.append((r.recalls, r.warnings))
            recalled += [recall.entry for recall in r.recalls] + r.warning_entries
        self.last_recalled = recalled
        wm = self.memory.working.agents.get(self.agent_id)
        return render_merged(results, self.memory.retriever.task_state(wm), self.memory.clock(),
                             self.memory.config.retrieval.language, self.prompt_limit)

    def end(self, goal_id: str, success: bool) -> None:
        self.memory.finish_goal(self.agent_id, goal_id,
                                GoalStatus.COMPLETED if success else GoalStatus.FAILED)
