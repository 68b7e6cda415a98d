"""The planner interface: choose the next action from what the planner is shown.

The planner interface: given the task, what is seen now, the allowed actions, the last K steps and
the memory prompt, choose the next action.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from brainmem_ros.core.errors import BrainMemError

__all__ = [
    "PlanningContext", "Planner", "PlannerError", "closest_action", "detect_interruption",
    "detect_resolution"
]


class PlannerError(BrainMemError):
    """The planner could not produce an action (backend unreachable, no usable answer)."""


@dataclass
class PlanningContext:
    task: str
    observation: str
    valid_actions: Sequence[str]
    window: Sequence[tuple[str, str]] = field(
        default_factory=list)  # (action, observation), oldest first
    memory_prompt: str = ""


class Planner(Protocol):
    """Chooses the next action.

    Planners may also offer ``memory_queries(context) -> list[str]`` (what to ask the memory this
    step; default: the observation) and ``reset(seed)``.
    """

    name: str

    def decide(self, context: PlanningContext) -> str:
        ...


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s-]", " ", text.lower())).strip()


def closest_action(answer: str, valid_actions: Sequence[str]) -> str:
    """Map a free-text answer to one of the valid actions, or raise PlannerError.

    Exact match first, then ignoring case and punctuation, then the valid action the answer contains
    (longest first), then the closest spelling (difflib, cutoff 0.75).
    """
    if not valid_actions:
        raise PlannerError("the environment offers no valid action")
    if answer in valid_actions:
        return answer
    wanted = _norm(answer)
    by_norm = {_norm(a): a for a in valid_actions}
    if wanted in by_norm:
        return by_norm[wanted]
    contained = [a for n, a in by_norm.items() if n and re.search(rf"\b{re.escape(n)}\b", wanted)]
    if contained:
        return max(contained, key=len)
    close = difflib.get_close_matches(wanted, list(by_norm), n=1, cutoff=0.75)
    if close:
        return by_norm[close[0]]
    raise PlannerError(f"the answer {answer[:80]!r} matches no valid action")


_ALARM = re.compile(
    r"\b(?:an?|the) ([a-z][a-z ]*?) (?:rings|is ringing|beeps|goes off) in the ([a-z][a-z "
    r"]*?)[!.]\s*([^.!\n]*)", re.I)
_RESOLVED = re.compile(
    r"\byou (?:switch|turn) off the ([a-z][a-z ]*?)\.|\bthe (?:ringing|beeping) stops\b", re.I)


def detect_interruption(observation: str) -> str:
    """Return the temporary goal an alarm in this observation raises, or "".

    The temporary goal an alarm in this observation raises ("switch off the timer in the hallway"),
    or "" when there is none. Generic words about alarms, no environment's internals.
    """
    m = _ALARM.search(observation)
    if not m:
        return ""
    todo = m.group(3).strip().rstrip(",") or f"switch off the {m.group(1)}"
    todo = re.split(r",\s*then\b", todo)[0].strip()
    return f"{todo} in the {m.group(2)}"


def detect_resolution(observation: str) -> bool:
    """Whether this observation says the alarm was dealt with."""
    return _RESOLVED.search(observation) is not None
