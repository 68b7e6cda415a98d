"""What the robot remembers, placed on the map: one landmark per remembered thing with a position.

A landmark is where the newest current memory about a thing was made (the robot's position when it
saw the butter in the fridge), from long-term memory and from what working memory holds but has not
consolidated yet. Superseded memories are left out, so when the butter moves, its landmark moves.
The store node draws them as markers; nothing here knows ROS.
"""
from __future__ import annotations

from dataclasses import dataclass

from brainmem_ros.core.health import ago
from brainmem_ros.core.trace import Position

__all__ = ["Landmark", "landmarks", "label"]

LABEL_CHARS = 60  # a label is read in a 3-D view beside others: the memory is cut to this


@dataclass(frozen=True)
class Landmark:
    agent_id: str
    entity: str
    position: Position
    frame: str
    text: str  # the memory that placed it
    stamp: float  # when that memory was made, robot time
    warning: bool = False  # a failure remembered about it
    recent: bool = False  # still in working memory


def landmarks(memory, limit: int) -> list[Landmark]:
    """Return up to ``limit`` landmarks, newest first, one per agent and thing."""
    found: dict[tuple[str, str], Landmark] = {}

    def offer(mark: Landmark) -> None:
        key = (mark.agent_id, mark.entity)
        if key not in found or found[key].stamp < mark.stamp:
            found[key] = mark

    with memory.working.lock:
        traces = [t for wm in memory.working.agents.values() for t in wm.traces
                  if t.position is not None]
    for trace in traces:
        about = [r.subject for r in trace.relations] or trace.entities
        for entity in dict.fromkeys(about):
            offer(Landmark(trace.agent_id, entity, trace.position, trace.frame, trace.text,
                           trace.timestamp, recent=True))
    # Several subjects per memory, and several memories per thing: read more rows than marks.
    for agent, entity, x, y, z, frame, content, created, warning in memory.store.positioned(
            4 * limit):
        offer(Landmark(agent, entity, Position(x, y, z), frame, content, created, warning))
    return sorted(found.values(), key=lambda m: -m.stamp)[:limit]


def label(mark: Landmark, now: float, with_agent: bool = False) -> str:
    """Say beside a landmark what it is, the memory, how long ago (and whose)."""
    text = mark.text if len(mark.text) <= LABEL_CHARS else mark.text[:LABEL_CHARS - 1] + "…"
    who = f" [{mark.agent_id}]" if with_agent else ""
    return f"{mark.entity}: {text} ({ago(now - mark.stamp)} ago){who}"
