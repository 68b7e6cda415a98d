"""A memory under consideration during one retrieval, with the evidence each route gave for it."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from brainmem_ros.core.trace import Entry, Trace, Zone

__all__ = ["Candidate", "trace_as_entry", "query_terms", "trace_terms", "ROUTES"]

# Similarity-based routes first: their evidence is the similarity itself (see ``rerank``).
ROUTES = ("vector", "working", "graph", "lexical", "temporal", "spatial")
_STOPWORDS = frozenset(
    "a an the is are was were be been am do does did i you we it its of in on at to from for with "
    "and or "
    "what where which who how when why next step now my your there here this that these those "
    "should "
    "can could would will shall me us them they he she his her have has had not no yes any some "
    "all "
    "after before then than into onto out up down about go get".split())


@dataclass
class Candidate:
    """One memory under consideration.

    Long-term ones carry only what scoring needs (from RAM); their entry is read from SQLite only if
    they make it to the final list.
    """

    entry: Optional[Entry]
    evidence: dict = field(default_factory=dict)
    rowid: Optional[int] = None
    vector: Optional[np.ndarray] = None
    scoring: tuple = ()  # importance, last_access, created, confidence

    @classmethod
    def of_entry(cls, entry: Entry) -> "Candidate":
        return cls(entry, {}, None, np.asarray(entry.embedding, dtype=np.float32),
                   (entry.importance, entry.last_access, entry.created, entry.confidence))

    def add(self, route: str, value: float) -> None:
        self.evidence[route] = max(self.evidence.get(route, 0.0), float(value))


def query_terms(text: str) -> list[str]:
    """Return the words of a question worth matching literally.

    The words of a question worth matching literally: no stopwords, no single letters.
    """
    words = re.findall(r"[\w'-]+", text.lower())
    return list(dict.fromkeys(w for w in words if len(w) > 1 and w not in _STOPWORDS))


@functools.lru_cache(maxsize=8192)
def trace_terms(text: str) -> frozenset[str]:
    """Return a working-memory trace's words, worked out once.

    A working-memory trace's words, worked out once: traces are matched against every query.
    """
    return frozenset(query_terms(text))


def trace_as_entry(trace: Trace) -> Entry:
    """Present a working-memory trace as an entry of zone WORKING."""
    return Entry(id=trace.id, agent_id=trace.agent_id, zone=Zone.WORKING, content=trace.text,
                 embedding=trace.embedding, entities=list(trace.entities),
                 relations=list(trace.relations), importance=trace.importance,
                 created=trace.timestamp, last_access=trace.timestamp, source=trace.source,
                 confidence=trace.confidence, location=trace.location, position=trace.position,
                 warning=trace.success is False, frame=trace.frame)
