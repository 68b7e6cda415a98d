"""Which memories a robot shares with its fleet.

By default what another robot can use as it is: semantic facts, procedures, warnings (remembered
failures) and completed goals. Episodes and failed-goal records are this robot's own history, and
working-memory traces are never shared: they are not consolidated yet.
"""
from __future__ import annotations

from typing import Sequence

from brainmem_ros.core.config import ConfigError
from brainmem_ros.core.consolidation import COMPLETED_GOAL
from brainmem_ros.core.trace import Entry, Zone

__all__ = ["SharePolicy", "KINDS"]

KINDS = ("fact", "procedure", "warning", "completed_goal", "episode", "goal")


def kind_of(entry: Entry) -> str:
    if entry.warning:
        return "warning"
    if entry.zone is Zone.SEMANTIC:
        return "fact"
    if entry.zone is Zone.PROCEDURAL:
        return "procedure"
    if entry.zone is Zone.GOAL:
        return "completed_goal" if entry.content.startswith(COMPLETED_GOAL) else "goal"
    return "episode"


class SharePolicy:

    def __init__(self, kinds: Sequence[str], agents: Sequence[str] = ()):
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ConfigError(f"fleet.kinds: unknown {', '.join(unknown)}; the kinds are "
                              f"{', '.join(KINDS)}")
        self.kinds = frozenset(kinds)
        self.agents = frozenset(agents)

    def __call__(self, entry: Entry) -> bool:
        """Tell whether ``entry`` goes to the fleet."""
        if entry.zone is Zone.WORKING or entry.origin:
            return False
        if self.agents and entry.agent_id not in self.agents:
            return False
        kind = kind_of(entry)
        return kind in self.kinds or (kind == "completed_goal" and "goal" in self.kinds)
