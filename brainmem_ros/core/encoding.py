"""Encoding: observations, action results and goal events become traces.

A trace gets its embedding (one batched model call for everything that arrived together), its
entities and relations (``extraction``), and its initial importance (``importance``), which needs to
know the active goal and what is already believed about the same entities.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from brainmem_ros.core.config import ImportanceSection
from brainmem_ros.core.embedding import Embedder
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.extraction import Vocabulary, canonical, extract
from brainmem_ros.core.importance import goal_relevance, initial_importance, novelty
from brainmem_ros.core.trace import Position, Trace, TraceKind
from brainmem_ros.core.validation import check_agent, check_position, check_text, check_unit

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


@dataclass
class EncodingContext:
    """What importance needs to know about one agent at encoding time."""

    goal_entities: set = field(default_factory=set)
    goal_embedding: Optional[np.ndarray] = None
    known_facts: dict = field(default_factory=dict)
    recent_embeddings: Optional[np.ndarray] = None


class Encoder:

    def __init__(self, embedder: Embedder, vocabulary: Vocabulary, weights: ImportanceSection,
                 max_text_chars: int):
        self.embedder = embedder
        self.vocabulary = vocabulary
        self._pattern = vocabulary.pattern()
        self.weights = weights
        self.max_text_chars = max_text_chars

    def validate(self, event: Event) -> None:
        check_agent(event.agent_id)
        check_text(event.text, "text", self.max_text_chars)
        check_unit(event.confidence, "confidence")
        check_position(event.position)
        if len(event.entities) > 256 or any(not isinstance(e, str) or len(e) > 200
                                            for e in event.entities):
            raise InvalidRequest("entities must be at most 256 names of at most 200 characters")

    def prepare(self, events: Sequence[Event]) -> list[Trace]:
        """Validate, embed and extract a batch of events; importance is left for ``score``.

        Validate everything first (a bad event rejects the batch), then embed in one call and
        extract entities and relations. Importance is left at 0: it needs the agent's context.
        """
        for event in events:
            self.validate(event)
        if not events:
            return []
        vectors = self.embedder.embed([e.text for e in events])
        now = time.time()
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
                      location=event.location, position=event.position, success=event.success,
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
