"""A change pulled from the fleet's server, checked before it may touch the store.

The server is shared, so what comes from it is treated as input from outside: a row of another
model, a vector of the wrong length or with NaN, text that is not text, a robot name no robot can
have, a stamp far in the future; each is refused with the reason and the store is left as it was.
Pulled memories belong to ``ROBOT/AGENT`` in this store and are shared with every local agent.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.trace import Entry, Position, Relation, Zone
from brainmem_ros.core.validation import check_agent, check_frame, check_text

__all__ = ["Pulled", "check_row", "ROBOT_NAME", "local_agent"]

# A robot is a PostgreSQL role: lower-case letters, digits and underscores.
ROBOT_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_ZONES = (Zone.SEMANTIC, Zone.EPISODIC, Zone.PROCEDURAL, Zone.GOAL)


@dataclass(frozen=True)
class Pulled:
    cursor: tuple[str, int]  # (transaction id, sequence) of the row on the server
    change: str  # "robot:change": what makes applying it twice a no-op
    robot: str
    op: str
    entry_id: str
    agent_id: str  # the agent in this store: ROBOT/AGENT
    entry: Optional[Entry]  # for a put


def local_agent(robot: str, agent: str) -> str:
    return f"{robot}/{agent}"


def _number(record: dict, key: str, default: float) -> float:
    value = record.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRequest(f"{key} must be a finite number, got {value!r}")
    return float(value)


def _strings(value, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidRequest(f"{what} must be a list of names")
    return value


def check_row(row: dict, model: str, dim: int, now: float, max_future_s: float) -> Pulled:
    """Turn one server row into a change to apply, or raise InvalidRequest saying why not."""
    robot, op, entry_id = row["robot"], row["op"], row["entry_id"]
    if not isinstance(robot, str) or not ROBOT_NAME.fullmatch(robot):
        raise InvalidRequest(f"robot name {robot!r} is not a fleet robot's name")
    if op not in ("put", "delete"):
        raise InvalidRequest(f"unknown operation {op!r}")
    if not isinstance(entry_id, str) or not 0 < len(entry_id) <= 64 or not entry_id.isprintable():
        raise InvalidRequest(f"entry id {entry_id!r} is not a memory id")
    agent = local_agent(robot, check_agent(row["agent_id"]))
    pulled = dict(cursor=(str(row["xid"]), int(row["seq"])), change=f"{robot}:{row['change']}",
                  robot=robot, op=op, entry_id=entry_id, agent_id=agent)
    if op == "delete":
        return Pulled(**pulled, entry=None)
    if row["model"] != model:
        raise InvalidRequest(f"embedded with {row['model']!r}; this robot embeds with {model!r}, "
                             "whose vectors do not compare with it")
    blob = row["embedding"]
    if row["dim"] != dim or not isinstance(blob, (bytes, bytearray, memoryview)) or \
            len(blob) != 4 * dim:
        raise InvalidRequest(f"the vector must have {dim} components")
    vector = np.frombuffer(bytes(blob), dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(vector)):
        raise InvalidRequest("the vector contains NaN or infinite values")
    return Pulled(**pulled, entry=_entry(row["record"], vector, robot, agent, entry_id, now,
                                         max_future_s))


def _entry(record, vector, robot, agent, entry_id, now, max_future_s) -> Entry:
    if not isinstance(record, dict):
        raise InvalidRequest("the record is not an object")
    try:
        zone = Zone(record.get("zone"))
    except ValueError:
        raise InvalidRequest(f"unknown zone {record.get('zone')!r}") from None
    if zone not in _ZONES:
        raise InvalidRequest(f"zone {zone.value!r} is not shared")
    relations = record.get("relations", [])
    if not isinstance(relations, list) or not all(
            isinstance(r, list) and len(r) == 3 and all(isinstance(x, str) and x for x in r)
            for r in relations):
        raise InvalidRequest("relations must be [subject, predicate, object] names")
    created = _number(record, "created", now)
    if created < 0 or created > now + max_future_s:
        raise InvalidRequest(f"created {created:.3f} is not a time before now ({now:.3f})")
    position = record.get("position")
    if position is not None:
        if not isinstance(position, list) or len(position) != 3 or not all(
                isinstance(c, (int, float)) and math.isfinite(c) for c in position):
            raise InvalidRequest("position must be three finite numbers")
        position = Position(*map(float, position))
    strength = record.get("strength", 1)
    if isinstance(strength, bool) or not isinstance(strength, int) or strength < 1:
        raise InvalidRequest("strength must be a positive whole number")
    return Entry(
        agent_id=agent, zone=zone,
        content=check_text(record.get("content"), "content", 4000), embedding=vector,
        entities=_strings(record.get("entities", []), "entities"),
        relations=[Relation(*r) for r in relations],
        importance=min(1.0, max(0.0, _number(record, "importance", 0.5))), created=created,
        last_access=created, source=str(record.get("source", "")),
        confidence=min(1.0, max(0.0, _number(record, "confidence", 1.0))),
        location=str(record.get("location", "")), position=position,
        frame=check_frame(str(record.get("frame", ""))) if position else "",
        warning=bool(record.get("warning", False)), strength=strength,
        goal_key=str(record.get("goal_key", "")), shared=True, origin=robot, id=entry_id)
