"""The agent-facing interface every environment offers, and nothing more.

A planner sees ``EnvState`` only: no object tree, no gold path, no layout. That is what makes the
scripted planner generic and the comparison between memory conditions honest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from brainmem_ros.core.errors import BrainMemError

__all__ = ["EnvState", "Environment", "EnvironmentError_"]


class EnvironmentError_(BrainMemError):
    """The environment could not be created or stepped.

    The environment could not be created or stepped (missing dependency, bad seed, no episode).
    """


@dataclass
class EnvState:
    task: str
    observation: str
    valid_actions: list[str]
    done: bool = False
    success: bool = False
    failed: bool = False
    info: dict = field(
        default_factory=dict)  # for the harness's bookkeeping; never shown to a planner


class Environment(Protocol):
    name: str

    def reset(self, seed: int) -> EnvState:
        ...

    def step(self, action: str) -> EnvState:
        ...

    def close(self) -> None:
        ...
