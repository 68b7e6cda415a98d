"""Encoding: observations, action results and goal events become traces.

A trace gets its embedding (one batched model call for everything that arrived together), its
entities and relations (``extraction``), and its initial importance (``importance``), which needs to
know the active goal and what is already believed about the same entities.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from brainmem_ros.core.clock import Clock, wall_clock
from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.embedding import Embedder
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.extraction import Vocabulary, canonical, extract
from brainmem_ros.core.importance import goal_relevance, initial_importance, novelty
from brainmem_ros.core.trace import Position, Trace, TraceKind
from brainmem_ros.core.validation import (check_agent, check_frame, check_position, check_text,
                                          check_unit)

__all__ = ["Event", "EncodingContext", "Encoder"]


@dataclass
class Event:
    """Raw input to the encoder, as a perception or action node reports it."""

    agent_id: str
    kind: TraceKind
    text: str
    entities: Sequence[str] = ()
    location: str = ""
    position: Optional[Position] = None
    source: str = ""
    confidence: float = 1.0
    success: Optional[bool] = None
    action: str = ""
    goal_id: str = ""
    timestamp: float = 0.0
    frame: str = ""  # the frame of ``position``; empty: the store's fixed frame


@dataclass
class EncodingContext:
    """What importance needs to know about one agent at encoding time."""

    goal_entities: set = field(default_factory=set)
    goal_embedding: Optional[np.ndarray] = None
    known_facts: dict = field(default_factory=dict)
    recent_embeddings: Optional[np.ndarray] = None


class Encoder:
    """Turns events into traces: validation, one batched embedding, entities and relations."""

    def __init__(self, embedder: Embedder, vocabulary: Vocabulary, config: MemoryConfig,
                 clock: Clock = wall_clock):
        self.embedder = embedder
        self.vocabulary = vocabulary
        self._pattern = vocabulary.pattern()
        self.weights = config.importance
        self.max_text_chars = config.encoding.max_text_chars
        self.max_future_s = config.encoding.max_future_s
        self.fixed_frame = config.store.fixed_frame
        self.frames = frozenset(config.store.frames)
        self.clock = clock

    def validate(self, event: Event, now: Optional[float] = None) -> None:
        """Refuse a bad event; with ``now``, also one stamped too far ahead of the clock."""
        check_agent(event.agent_id)
        check_text(event.text, "text", self.max_text_chars)
        check_unit(event.confidence, "confidence")
        if len(event.entities) > 256 or any(not isinstance(e, str) or len(e) > 200
                                            for e in event.entities):
            raise InvalidRequest("entities must be at most 256 names of at most 200 characters")
        self.check_place_and_time(event.position, event.frame, event.timestamp, now)

    def check_place_and_time(self, position: Optional[Position], frame: str, stamp: float,
                             now: Optional[float]) -> None:
        """Refuse a position that is not finite or is in an unknown frame, and a bad stamp.

        A stamp more than ``encoding.max_future_s`` ahead of ``now`` is refused: a sender with a
        wrong clock would make its memories newer than everything seen since.
        """
        check_position(position)
        check_frame(frame)
        if position is not None and self.frames and frame and frame != self.fixed_frame \
                and frame not in self.frames:
            raise InvalidRequest(f"unknown frame {frame!r}: positions are accepted in "
                                 f"{', '.join(sorted({self.fixed_frame, *self.frames}))}")
        if not isinstance(stamp, (int, float)) or not math.isfinite(stamp) or stamp < 0:
            raise InvalidRequest(f"stamp must be a time in seconds, got {stamp!r}")
        if now is not None and stamp > now + self.max_future_s:
            raise InvalidRequest(f"stamp {stamp:.3f} is {stamp - now:.0f} s ahead of the clock "
                                 f"({now:.3f}), more than encoding.max_future_s")

    def prepare(self, events: Sequence[Event]) -> list[Trace]:
        """Validate, embed and extract a batch of events; importance is left for ``score``.

        Validate everything first (a bad event rejects the batch), then embed in one call and
        extract entities and relations. Importance is left at 0: it needs the agent's context.
        """
        if not events:
            return []
        now = self.clock()
        for event in events:
            self.validate(event, now)
        vectors = self.embedder.embed([e.text for e in events])
        traces = []
        for event, vector in zip(events, vectors):
            found = extract(event.text, self.vocabulary, self._pattern)
            entities = list(
                dict.fromkeys([canonical(e)
                               for e in event.entities if canonical(e)] + found.entities))
            traces.append(
                Trace(agent_id=event.agent_id, kind=event.kind, text=event.text.strip(),
                      embedding=vector, entities=entities, relations=found.relations,
                      importance=0.0, timestamp=event.timestamp or now, source=event.source
                      or event.kind.value, confidence=float(event.confidence),
                      location=event.location, position=event.position,
                      frame=(event.frame or self.fixed_frame) if event.position is not None else "",
                      success=event.success,
                      action=event.action, goal_id=event.goal_id))
        return traces

    def score(self, traces: Sequence[Trace], context_for: Callable[[str],
                                                                   EncodingContext]) -> list[Trace]:
        """Score each trace's initial importance against its agent's goal and knowledge."""
        contexts: dict[str, EncodingContext] = {}
        for trace in traces:
            ctx = contexts.get(trace.agent_id) or contexts.setdefault(trace.agent_id,
                                                                      context_for(trace.agent_id))
            nearest = 0.0
            if ctx.recent_embeddings is not None and len(ctx.recent_embeddings):
                nearest = float(np.max(ctx.recent_embeddings @ trace.embedding))
            relevance = goal_relevance(trace.entities, trace.embedding, ctx.goal_entities,
                                       ctx.goal_embedding)
            trace.importance = initial_importance(
                self.weights, relevance=relevance,
                novelty_score=novelty(trace.relations, ctx.known_facts, nearest),
                success=trace.success, is_action=trace.kind is TraceKind.ACTION)
            for rel in trace.relations:  # later traces of a batch see earlier ones as known
                ctx.known_facts[(rel.subject, rel.predicate)] = rel.object
        return list(traces)

    def encode(self, events: Sequence[Event],
               context_for: Callable[[str], EncodingContext]) -> list[Trace]:
        return self.score(self.prepare(events), context_for)
