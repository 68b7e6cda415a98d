"""The checks every entry point applies to what callers send, with messages a service can pass on.

One place, so the encoder, the store and the memory facade refuse the same things the same way.
"""
from __future__ import annotations

import math
import re
from typing import Optional, Sequence

import numpy as np

from brainmem_ros.core.errors import InvalidRequest

__all__ = [
    "check_agent", "check_text", "check_unit", "check_position", "check_embedding", "check_frame"
]

_CONTROL = re.compile(r"[\x00-\x1f]")
# A frame id as tf2 and ROS 2 write them: no spaces, no leading slash.
_FRAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}")


def check_agent(agent_id: str) -> str:
    if not isinstance(agent_id, str) or not agent_id.strip():
        raise InvalidRequest("agent_id must not be empty")
    if len(agent_id) > 128 or _CONTROL.search(agent_id):
        raise InvalidRequest("agent_id must be at most 128 printable characters")
    return agent_id


def check_text(text: str, what: str, max_chars: int) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest(f"{what} must not be empty")
    if len(text) > max_chars:
        raise InvalidRequest(f"{what} is {len(text)} characters, more than the {max_chars} allowed")
    if "\x00" in text:
        raise InvalidRequest(f"{what} contains a NUL character")
    return text


def check_unit(value, what: str) -> float:
    """Check a value in [0, 1] (importance, confidence)."""
    if not (isinstance(value,
                       (int, float, np.floating)) and math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InvalidRequest(f"{what} must be within [0, 1], got {value!r}")
    return float(value)


def check_position(position: Optional[Sequence[float]]) -> None:
    if position is not None and not all(math.isfinite(c) for c in position):
        raise InvalidRequest("position contains NaN or infinite values")


def check_embedding(embedding, dim: int) -> np.ndarray:
    try:
        vector = np.asarray(embedding, dtype=np.float32)
    except (TypeError, ValueError) as exc:  # text, ragged lists: numpy's own error is no answer
        raise InvalidRequest(f"embedding must be {dim} numbers: {exc}") from exc
    if vector.shape != (dim, ):
        got = vector.size if vector.ndim == 1 else f"an array of shape {vector.shape}"
        raise InvalidRequest(f"embedding must have {dim} components, got {got}")
    if not np.all(np.isfinite(vector)):
        raise InvalidRequest("embedding contains NaN or infinite values")
    return vector


def check_frame(frame: str) -> str:
    """Check a frame id (empty means: the store's fixed frame)."""
    if not isinstance(frame, str) or (frame and not _FRAME.fullmatch(frame)):
        raise InvalidRequest(f"frame_id {frame!r} is not a frame name (letters, digits, _ . / -; "
                             "no spaces, no leading slash; at most 128)")
    return frame
