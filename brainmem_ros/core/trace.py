"""The memory's data: traces (what was just encoded) and entries (what memory keeps).

Plain dataclasses with no ROS types, so the core can be used and tested without a ROS install. The
nodes translate these to and from ``brainmem_ros.msg``.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple, Optional, Sequence

import numpy as np

__all__ = [
    "Zone", "LONG_TERM_ZONES", "Relation", "Position", "TraceKind", "Trace", "Entry", "Recall",
    "GoalStatus", "Goal", "new_id"
]


class Zone(str, Enum):
    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    GOAL = "goal"


LONG_TERM_ZONES = (Zone.EPISODIC, Zone.SEMANTIC, Zone.PROCEDURAL, Zone.GOAL)


def new_id(prefix: str) -> str:
    """``prefix-``, the time in milliseconds (11 hex digits) and 64 random bits in hex.

    Time first, as in UUIDv7: new ids sort after old ones, so the unique index on ids grows at its
    end instead of at random pages, and a commit writes fewer pages. 64 random bits keep ids from
    two robots apart.
    """
    return new_ids([prefix])[0]


def new_ids(prefixes: Sequence[str]) -> list[str]:
    """Make ``new_id`` for many memories from one ``os.urandom`` call.

    Each ``os.urandom`` call is a system call; one per memory is a noticeable share of a
    pre-embedded ingest.
    """
    stamp = f"{time.time_ns() // 1_000_000:011x}"
    raw = os.urandom(8 * len(prefixes)).hex()
    return [f"{prefix}-{stamp}{raw[16 * i:16 * i + 16]}" for i, prefix in enumerate(prefixes)]


class Relation(NamedTuple):
    subject: str
    predicate: str
    object: str


class Position(NamedTuple):
    x: float
    y: float
    z: float = 0.0


class TraceKind(str, Enum):
    OBSERVATION = "observation"
    ACTION = "action"
    GOAL_EVENT = "goal"


@dataclass
class Trace:
    """One encoded event: an observation, an action result or a goal event, not yet consolidated."""

    agent_id: str
    kind: TraceKind
    text: str
    embedding: np.ndarray
    entities: list[str]
    relations: list[Relation]
    importance: float
    timestamp: float
    source: str = "observation"
    confidence: float = 1.0
    location: str = ""
    position: Optional[Position] = None
    success: Optional[bool] = None
    action: str = ""
    goal_id: str = ""
    id: str = ""
    frame: str = ""  # the frame of ``position``


@dataclass
class Entry:
    """One memory in long-term (or, with zone WORKING, working) memory.

    ``importance`` is the value at ``last_access``; what a reader sees is that value decayed to now
    (see ``forgetting.decayed_importance``).
    """

    agent_id: str
    zone: Zone
    content: str
    embedding: np.ndarray
    entities: list[str] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    importance: float = 0.5
    created: float = 0.0
    last_access: float = 0.0
    access_count: int = 0
    source: str = "observation"
    confidence: float = 1.0
    location: str = ""
    position: Optional[Position] = None
    shared: bool = False
    superseded: bool = False
    warning: bool = False
    strength: int = 1
    goal_key: str = ""
    derived_from: list[str] = field(default_factory=list)
    id: str = ""
    frame: str = ""  # the frame of ``position``
    origin: str = ""  # the robot that learned it, for a memory shared by the fleet; "" for our own


@dataclass
class Recall:
    """A retrieved memory with its final score, its relevance and the routes that found it."""

    entry: Entry
    score: float
    relevance: float
    routes: list[str]
    importance_now: float


class GoalStatus(int, Enum):
    PENDING = 0
    ACTIVE = 1
    COMPLETED = 2
    FAILED = 3
    SUSPENDED = 4


@dataclass
class Goal:
    id: str
    description: str
    agent_id: str
    parent_id: str = ""
    status: GoalStatus = GoalStatus.ACTIVE
    temporary: bool = False
    stamp: float = 0.0
