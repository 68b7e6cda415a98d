"""One episode: the planner asks the memory, decides, acts; the memory is told what happened.

The loop is shared by the in-process evaluation and planner_node, so ``--via-ros`` differs only in
the transport. Conditions differ only in what the planner is shown:

- ``window``: the last K (action, observation) steps;
- ``brainmem``: the same window plus the memory prompt retrieved right before each action;
- ``full``: every step of the episode so far (the upper bound a prompt could hold).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Optional, Protocol, Sequence

from brainmem_ros.kitchen.base import EnvState
from brainmem_ros.planning.base import PlanningContext, detect_interruption, detect_resolution
from brainmem_ros.planning.reading import looks_failed

__all__ = ["CONDITIONS", "EpisodeRecord", "MemoryPort", "EnvPort", "episode_agent", "run_episode"]

CONDITIONS = ("window", "brainmem", "full")


class EnvPort(Protocol):

    def reset(self, seed: int) -> EnvState:
        ...

    def step(self, action: str) -> EnvState:
        ...


class MemoryPort(Protocol):
    """What an episode needs from a memory system, whichever process it lives in."""

    def begin(self, task: str) -> str:
        ...

    def interrupt(self, description: str) -> str:
        ...

    def resolve(self, goal_id: str) -> None:
        ...

    def record(self, action: str, result: str, success: bool, location: str = "") -> None:
        ...

    def observe(self, text: str) -> None:
        ...

    def recall(self, queries: Sequence[str], context: str) -> str:
        ...

    def end(self, goal_id: str, success: bool) -> None:
        ...


@dataclass
class EpisodeRecord:
    env: str
    condition: str
    seed: int
    attempt: int
    task: str
    success: bool
    failed: bool
    failure: str  # what ended it in failure ("" when it did not fail)
    steps: int
    interrupted: bool
    timer_handled: bool
    retrieve_ms: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    decide_ms: list = field(default_factory=list)  # the planner's time per step

    def to_dict(self) -> dict:
        return asdict(self)


def episode_agent(robot: str, seed: int, lifelong: bool = False) -> str:
    """Whose memory a seed's episodes write and read.

    One agent per seed keeps games apart as the store keeps robots apart; ``lifelong``: the robot
    itself plays every seed, and what it learnt in one game is there in the next.
    """
    return robot if lifelong else f"{robot}-s{seed}"


def _shown(history: list, condition: str, window: int) -> list:
    if condition == "full":
        return list(history)
    return list(history[-window:]) if window > 0 else []


def _recall(memory: MemoryPort, planner, context: PlanningContext) -> str:
    """Ask the memory what the planner wants to know.

    A planner with ``memory_queries`` asks twice: what it wants to know from the window alone, then
    what the first answer makes it want to know (the plan recalled names the next step, whose
    ingredient it then asks about).
    """
    if not hasattr(planner, "memory_queries"):
        return memory.recall([context.observation], context.task)
    queries = list(planner.memory_queries(context))
    prompt = memory.recall(queries, context.task)
    context.memory_prompt = prompt
    more = [q for q in planner.memory_queries(context) if q not in queries]
    if more:
        prompt = memory.recall(queries + more, context.task)
    return prompt


def run_episode(env: EnvPort, planner, condition: str, seed: int, window: int, max_steps: int,
                memory: Optional[MemoryPort] = None, attempt: int = 0,
                env_name: str = "") -> EpisodeRecord:
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {', '.join(CONDITIONS)}, got {condition!r}")
    if (condition == "brainmem") != (memory is not None):
        raise ValueError("the brainmem condition needs a memory, the others must not have one")
    if hasattr(planner, "reset"):
        planner.reset(seed * 1000 + attempt)
    state = env.reset(seed)
    history: list[tuple[str, str]] = [("", state.observation)]  # where the episode started
    goal = memory.begin(state.task) if memory else ""
    if memory:
        memory.observe(state.observation)
    temporary = ""
    retrieve_ms: list[float] = []
    decide_ms: list[float] = []
    steps = 0
    while not state.done and steps < max_steps:
        context = PlanningContext(state.task, state.observation, list(state.valid_actions),
                                  _shown(history, condition, window), "")
        if memory:
            t0 = time.perf_counter()
            context.memory_prompt = _recall(memory, planner, context)
            retrieve_ms.append((time.perf_counter() - t0) * 1000.0)
        t0 = time.perf_counter()
        action = planner.decide(context)
        decide_ms.append((time.perf_counter() - t0) * 1000.0)
        where = str(state.info.get("location", ""))  # where it acted, as a robot's localiser says
        state = env.step(action)
        steps += 1
        history.append((action, state.observation))
        if memory:
            memory.record(action, state.observation, not state.failed
                          and not looks_failed(state.observation), where)
            alarm = detect_interruption(state.observation)
            if alarm and not temporary and not state.done:
                temporary = memory.interrupt(alarm)
            elif temporary and detect_resolution(state.observation):
                memory.resolve(temporary)
                temporary = ""
    if memory:
        memory.end(goal, state.success)
    return EpisodeRecord(env_name, condition, seed, attempt, state.task, bool(state.success),
                         bool(state.failed),
                         str(state.info.get("failure", "")) if state.failed else "", steps,
                         bool(state.info.get("interrupted", False)),
                         bool(state.info.get("timer_handled", False)), retrieve_ms,
                         [a for a, _ in history[1:]], decide_ms)
