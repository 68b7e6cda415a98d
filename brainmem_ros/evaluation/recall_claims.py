"""What a remembered text says about the world, judged against the engine's truth.

A text claims a place for an object when a sentence names both (or says it was taken, dropped or is
carried), and a state for a container or door when a sentence names it with an open, close or lock
word. Claims are read sentence by sentence, so a room description naming the fridge and, two
sentences on, the carrot on the counter claims the counter for the carrot, not the fridge.
"""
from __future__ import annotations

import re
from typing import Iterable

__all__ = ["place_claims", "state_claims", "mentions"]


def _has(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def mentions(name: str, text: str) -> bool:
    return _has(name.lower(), text.lower())


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text.lower()) if s.strip()]


def place_claims(thing: str, text: str, holders: Iterable[str]) -> set[str]:
    """Places the text gives ``thing``: "held", "floor" or a holder's name."""
    thing, low, claims = thing.lower(), text.lower(), set()
    if low.startswith("you are carrying") and _has(thing, low):
        return {"held"}
    for sentence in _sentences(low):
        if not _has(thing, sentence):
            continue
        if re.search(rf"\byou (?:take|pick up) (?:the )?{re.escape(thing)}\b", sentence):
            claims.add("held")
            continue
        if re.search(rf"\byou drop (?:the )?{re.escape(thing)}\b", sentence) or \
                re.search(r"\bon the floor\b", sentence):
            claims.add("floor")
            continue
        claims |= {h for h in holders if h != thing and _has(h, sentence)}
    return claims


def state_claims(name: str, text: str) -> set[str]:
    """States the text gives a container or door: "open", "closed", "locked"."""
    name, claims = re.escape(name.lower()), set()
    for sentence in _sentences(text):
        if not re.search(rf"(?<![\w-]){name}(?![\w-])", sentence):
            continue
        told = re.search(rf"{name}(?: [a-z]+){{0,3}}? is (open|closed|locked)\b", sentence)
        if told:  # "the plain door leading north is closed"
            claims.add(told.group(1))
        elif re.search(rf"\blocked (?:\w+ )?{name}", sentence):
            claims.add("locked")
        elif re.search(rf"\bclosed? (?:the )?{name}|open (?:the )?{name} first", sentence):
            claims.add("closed")
        elif re.search(rf"\bopen(?:ed)? (?:the )?{name}|{name},? revealing|"
                       rf"{name} (?:is empty|contains)", sentence):
            claims.add("open")
    return claims
