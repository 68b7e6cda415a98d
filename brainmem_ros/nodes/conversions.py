"""Messages <-> core types. The only place that knows both worlds' field names."""
from __future__ import annotations

from array import array
from typing import Optional

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point

from brainmem_ros.core.encoding import Event
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.msg import (ActionResult, EntityState, Goal as GoalMsg, MemoryEntry, Observation,
                              Relation as RelationMsg)
from brainmem_ros.msg import Trace as TraceMsg
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import (Entry, Goal, GoalStatus, Position, Recall, Relation, Trace,
                                     TraceKind, Zone)

_KIND_TO_MSG = {
    TraceKind.OBSERVATION: TraceMsg.KIND_OBSERVATION,
    TraceKind.ACTION: TraceMsg.KIND_ACTION,
    TraceKind.GOAL_EVENT: TraceMsg.KIND_GOAL_EVENT
}
_KIND_FROM_MSG = {v: k for k, v in _KIND_TO_MSG.items()}


def to_time(seconds: float) -> Time:
    seconds = max(0.0, float(seconds))
    sec = int(seconds)
    return Time(sec=min(sec, 2**31 - 1), nanosec=min(int((seconds - sec) * 1e9), 999_999_999))


def from_time(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def _float32s(vector) -> array:
    """Make a float32[] field from a vector.

    rclpy takes an array('f') as it is, but checks a list's elements one by one.
    """
    return array("f", np.ascontiguousarray(vector, dtype=np.float32).tobytes())


def _position(point: Point, has: bool) -> Optional[Position]:
    return Position(point.x, point.y, point.z) if has else None


def _point(position: Optional[Position]) -> tuple[Point, bool]:
    if position is None:
        return Point(), False
    return Point(x=float(position.x), y=float(position.y), z=float(position.z)), True


def observation_event(msg: Observation) -> Event:
    return Event(msg.agent_id, TraceKind.OBSERVATION, msg.text, list(msg.entities), msg.location,
                 _position(msg.position, msg.has_position), msg.source or "observation",
                 float(msg.confidence) if msg.confidence > 0 else 1.0,
                 frame=msg.header.frame_id, timestamp=from_time(msg.header.stamp))


def action_event(msg: ActionResult) -> Event:
    text = f"{msg.action}: {msg.result}" if msg.result else msg.action
    return Event(msg.agent_id, TraceKind.ACTION, text, list(msg.entities), msg.location, None,
                 "action", 1.0, success=bool(msg.success), action=msg.action, goal_id=msg.goal_id,
                 timestamp=from_time(msg.header.stamp))


def trace_to_msg(trace: Trace) -> TraceMsg:
    msg = TraceMsg(
        agent_id=trace.agent_id, kind=_KIND_TO_MSG[trace.kind], text=trace.text,
        embedding=_float32s(trace.embedding), entities=list(trace.entities), relations=[
            RelationMsg(subject=r.subject, predicate=r.predicate, object=r.object)
            for r in trace.relations
        ], source=trace.source, confidence=float(trace.confidence), location=trace.location,
        has_success=trace.success is not None, success=bool(trace.success), action=trace.action,
        goal_id=trace.goal_id)
    msg.header.stamp = to_time(trace.timestamp)
    msg.header.frame_id = trace.frame
    msg.position, msg.has_position = _point(trace.position)
    return msg


def trace_from_msg(msg: TraceMsg) -> Trace:
    if msg.kind not in _KIND_FROM_MSG:
        raise InvalidRequest(f"unknown trace kind {msg.kind}")
    embedding = np.asarray(msg.embedding, dtype=np.float32)
    return Trace(agent_id=msg.agent_id, kind=_KIND_FROM_MSG[msg.kind], text=msg.text,
                 embedding=embedding, entities=list(msg.entities),
                 relations=[Relation(r.subject, r.predicate, r.object) for r in msg.relations
                            ], importance=0.0, timestamp=from_time(msg.header.stamp),
                 source=msg.source, confidence=float(msg.confidence), location=msg.location,
                 position=_position(msg.position, msg.has_position), frame=msg.header.frame_id,
                 success=bool(msg.success) if msg.has_success else None, action=msg.action,
                 goal_id=msg.goal_id)


def _or_default(value: float, default: float) -> float:
    """Read a message's optional float, where 0.0 means not set.

    A message's 0.0 means "not set"; anything else (NaN included) is passed on to be validated.
    """
    return default if value == 0.0 else float(value)


def entry_from_msg(msg: MemoryEntry) -> Entry:
    try:
        zone = Zone(msg.zone)
    except ValueError:
        raise InvalidRequest(
            f"unknown zone {msg.zone!r}; zones are episodic, semantic, procedural, goal") from None
    embedding = np.asarray(msg.embedding, dtype=np.float32) if len(msg.embedding) else None
    created = from_time(msg.created)
    return Entry(agent_id=msg.agent_id, zone=zone, content=msg.content, embedding=embedding,
                 entities=list(msg.entities),
                 relations=[Relation(r.subject, r.predicate, r.object)
                            for r in msg.relations], importance=_or_default(msg.importance, 0.5),
                 created=created, last_access=from_time(msg.last_access) or created,
                 source=msg.source or "user", confidence=_or_default(msg.confidence,
                                                                     1.0), location=msg.location,
                 position=_position(msg.position, msg.has_position), frame=msg.frame_id,
                 shared=msg.shared, warning=msg.warning)


def recall_from_msg(msg: MemoryEntry) -> Recall:
    """Turn a retrieval result back into the core's terms.

    A retrieval result back into the core's terms (a client merging several retrievals).
    """
    entry = entry_from_msg(msg)
    entry.id = msg.id
    return Recall(entry, float(msg.score), float(msg.score), list(msg.routes),
                  float(msg.importance))


def entry_to_msg(entry: Entry, recall: Optional[Recall] = None,
                 with_embedding: bool = False) -> MemoryEntry:
    msg = MemoryEntry(
        id=entry.id, agent_id=entry.agent_id, shared=entry.shared, zone=entry.zone.value,
        content=entry.content, entities=list(entry.entities), relations=[
            RelationMsg(subject=r.subject, predicate=r.predicate, object=r.object)
            for r in entry.relations
        ], importance=float(recall.importance_now if recall else entry.importance),
        access_count=int(entry.access_count), source=entry.source,
        confidence=float(entry.confidence), location=entry.location, superseded=entry.superseded,
        warning=entry.warning)
    if with_embedding and entry.embedding is not None:
        msg.embedding = _float32s(entry.embedding)
    msg.created, msg.last_access = to_time(entry.created), to_time(entry.last_access)
    msg.position, msg.has_position = _point(entry.position)
    msg.frame_id = entry.frame
    msg.origin = entry.origin
    if recall is not None:
        msg.score, msg.routes = float(recall.score), list(recall.routes)
    return msg


def retrieval_request(req) -> RetrievalRequest:
    return RetrievalRequest(
        agent_id=req.agent_id, query=req.query, context=req.context, zones=list(req.zones),
        top_k=int(req.top_k), min_score=float(req.min_score),
        include_working=not req.exclude_working, include_superseded=bool(req.include_superseded),
        since=float(req.since), until=float(req.until),
        position=_position(req.position, req.has_position), radius=float(req.radius),
        frame=req.frame_id)


def goal_to_msg(goal: Goal) -> GoalMsg:
    return GoalMsg(id=goal.id, parent_id=goal.parent_id, agent_id=goal.agent_id,
                   description=goal.description, status=int(goal.status), temporary=goal.temporary,
                   stamp=to_time(goal.stamp))


def status_from_msg(status: int) -> GoalStatus:
    try:
        return GoalStatus(status)
    except ValueError:
        raise InvalidRequest(f"unknown goal status {status}") from None


def entity_state_to_msg(state) -> EntityState:
    return EntityState(entity=state.entity, location=state.location, state=state.state,
                       stamp=to_time(state.stamp), entry_id=state.entry_id)


def action_to_msg(trace: Trace) -> ActionResult:
    msg = ActionResult(agent_id=trace.agent_id, action=trace.action or trace.text,
                       success=bool(trace.success), result=trace.text,
                       entities=list(trace.entities), location=trace.location,
                       goal_id=trace.goal_id)
    msg.header.stamp = to_time(trace.timestamp)
    return msg
