"""What a retrieval is asked and what it answers, and the checks every request passes first."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.trace import LONG_TERM_ZONES, Entry, Position, Recall, Zone
from brainmem_ros.core.validation import check_agent, check_frame, check_text

__all__ = ["RetrievalRequest", "RetrievalResult", "parse_zones", "validate"]


@dataclass
class RetrievalRequest:
    agent_id: str
    query: str
    context: str = ""
    zones: Sequence[str] = ()
    top_k: int = 0
    min_score: float = 0.0
    include_working: bool = True
    include_superseded: bool = False
    since: float = 0.0
    until: float = 0.0
    position: Optional[Position] = None
    radius: float = 0.0
    frame: str = ""  # the frame of ``position``; empty: the store's fixed frame


@dataclass
class RetrievalResult:
    recalls: list[Recall]
    prompt: str
    warnings: list[str]
    timings_ms: dict = field(default_factory=dict)
    warning_entries: list[Entry] = field(default_factory=list)  # what ``warnings`` say


def parse_zones(zones: Sequence[str]) -> tuple[list[Zone], bool]:
    """Long-term zones to search, and whether working memory was named."""
    if not zones:
        return list(LONG_TERM_ZONES), False
    parsed = []
    for name in zones:
        try:
            parsed.append(Zone(name))
        except ValueError:
            raise InvalidRequest(f"unknown zone {name!r}; zones are "
                                 f"{', '.join(z.value for z in Zone)}") from None
    return [z for z in parsed if z is not Zone.WORKING], Zone.WORKING in parsed


def validate(req: RetrievalRequest, config: MemoryConfig) -> tuple[list[Zone], bool, int]:
    """Refuse a bad request before anything is read.

    Returns the long-term zones to search, whether working memory is searched, and top_k.
    """
    cfg = config.retrieval
    max_chars = config.encoding.max_text_chars
    check_agent(req.agent_id)
    check_text(req.query, "query", max_chars)
    if req.context and len(req.context) > max_chars:
        raise InvalidRequest(f"context is longer than {max_chars} characters")
    top_k = req.top_k or cfg.top_k
    if not isinstance(top_k, int) or top_k < 1 or top_k > cfg.max_top_k:
        raise InvalidRequest(
            f"top_k must be within 1..{cfg.max_top_k} (0 means {cfg.top_k}), got {req.top_k}")
    if not (math.isfinite(req.min_score) and 0.0 <= req.min_score <= 1.0):
        raise InvalidRequest(f"min_score must be within [0, 1], got {req.min_score}")
    for name in ("since", "until"):
        value = getattr(req, name)
        if not math.isfinite(value) or value < 0:
            raise InvalidRequest(f"{name} must be a non-negative time, got {value}")
    if req.until and req.since and req.until < req.since:
        raise InvalidRequest("until must not be earlier than since")
    check_frame(req.frame)
    if req.position is not None:
        if not all(math.isfinite(c) for c in req.position):
            raise InvalidRequest("position contains NaN or infinite values")
        if not (math.isfinite(req.radius) and req.radius > 0):
            raise InvalidRequest(
                f"radius must be a positive distance when a position is given, got {req.radius}")
    zones, named_working = parse_zones(req.zones)
    return zones, named_working or (req.include_working and not req.zones), top_k
