"""What a planner can know, read from text alone: the belief behind the scripted planner.

``read_belief`` turns the texts a planner has been shown (the memory prompt, its window of recent
steps, the current observation) into a ``Belief``: the written plan, the rooms and their exits,
where each wanted thing was last seen, what is in hand, which steps are done, pending alarms, and
orderings learned from remembered failures. It reads English the way the environments write it
("You are in the X", "To the North you see the Y", "a fridge that contains ...", "You take the Z"),
never an environment's internals, so the same reader serves our kitchen and CookingWorld. Whatever
the texts do not say, the belief does not know: that is the whole point of the memory conditions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from brainmem_ros.core.extraction import canonical

__all__ = [
    "Belief", "Event", "read_belief", "memory_events", "norm", "looks_failed", "ROUTINE_VERBS"
]

ROUTINE_VERBS = ("move", "go", "look", "examine", "inventory", "read", "open", "close", "take",
                 "drop")
_ARTICLES = re.compile(r"\b(?:the|a|an|some)\b\s*")
_HERE = re.compile(r"you are in the ([a-z][a-z ]*?)(?:\.|$)")
_EXIT = re.compile(r"to the (north|south|east|west) you see the ([a-z][a-z ]*?)(?:\.|$)")
_MENTION = re.compile(r"\b(?:a|an|some) ([a-z][a-z -]*?)(?= that\b|,| and\b|\.|$| on it| pinned\b)")
_HOLDS = re.compile(
    r"\b(?:a|an|some) (?:open )?([a-z][a-z -]*?),? that (?:has|contains) (.+?)(?: on "
    r"it)?(?=[.;]|, (?:a|an) [a-z -]+ that|, and (?:a|an) |$)")
_OPENED = re.compile(
    r"you open the ([a-z][a-z ]*?)\.\s*(?:the [a-z ]+ contains (.+?)\.|it(?: is|'s) empty)")
_CLOSED = re.compile(r"\b(?:a|an) ([a-z][a-z -]*?) that is closed")
_TAKE = re.compile(r"you take the ([a-z][a-z -]*?)(?: from the [a-z ]+)?(?:\.|$| \(success\))")
_DROP = re.compile(
    r"you (?:drop|put) the ([a-z][a-z -]*?) (?:in|on|into|onto) the ([a-z][a-z -]*?)(?:\.|$| "
    r"\(success\))")
_ALARM = re.compile(
    r"an? ([a-z][a-z ]*?) (?:rings|is ringing|beeps|goes off|is beeping) in the ([a-z][a-z "
    r"]*?)[!.]\s*([^.!\n]*)")
_STILL = re.compile(r"the ([a-z][a-z ]*?) is still (?:ringing|beeping) in the ([a-z][a-z ]*?)\.")
_FAILED_WORDS = ("you can't", "unknown action", "not sure what you mean", "failed",
                 "nothing happens", "you don't", "there is no")
_AGO = re.compile(r"^(just now|\d+ s ago|\d+ min ago|\d+ h ago|\d+ days ago):\s*")


def norm(text: str) -> str:
    """Lower case, articles and punctuation gone: "Slice the Bread." -> "slice bread"."""
    text = re.sub(r"[^\w\s-]", " ", text.lower())
    return " ".join(_ARTICLES.sub("", text).split())


@dataclass
class Event:
    """One thing the planner was shown: an action it took (if any) and the text that came back."""

    text: str
    action: str = ""
    failed: bool = False
    warning: bool = False
    recalled: bool = False  # from the memory prompt: an alarm in it is history, not news


@dataclass
class Belief:
    task: str = ""
    plan: list[str] = field(default_factory=list)
    ingredients: list[str] = field(default_factory=list)
    room: str = ""
    visited: set = field(default_factory=set)
    exits: dict = field(default_factory=dict)  # room -> {direction: room}
    where: dict = field(default_factory=dict)  # thing -> (room, holder or "")
    fixtures: dict = field(default_factory=dict)  # phrase seen in a room description -> room
    closed: dict = field(default_factory=dict)  # room -> containers last seen closed
    held: set = field(default_factory=set)
    done_actions: list = field(default_factory=list)  # normalised actions that worked
    done_texts: list = field(default_factory=list)  # what came back from them, lower case
    alarm: Optional[tuple[str, str]] = None  # (room, what to do)
    avoid: set = field(default_factory=set)  # normalised actions that failed before
    before: list = field(default_factory=list)  # (a, b): the step naming a goes before b
    read_room: str = ""  # where the plan was read

    def step_done(self, step: str) -> bool:
        s = norm(step)
        if s in self.done_actions:
            return True
        words = s.split()
        verb, rest = words[0], " ".join(words[1:])
        forms = {
            verb, verb + "d", verb + "ed", verb + "s",
            verb[:-1] + "ied" if verb.endswith("y") else verb
        }
        for text in self.done_texts:
            tw = norm(text)
            if rest and rest in tw and any(re.search(rf"\b{re.escape(f)}\b", tw) for f in forms):
                return True
        return False


# "robot2 found: ..." on a memory shared by the fleet (core.prompt.said).
_FOUND_BY = re.compile(r"^((?:Warning|Fact|Procedure|Goal history): )?[a-z_][a-z0-9_]* found: ")


def memory_events(prompt: str) -> list[Event]:
    """Return the memory prompt as events, oldest first (the prompt lists episodes newest first)."""
    if not prompt.strip():
        return []
    items: list[str] = []
    state_lines: list[str] = []
    section = ""
    for line in prompt.splitlines():
        if line.startswith("## "):
            section = line
            continue
        if "memories" in section.lower():
            if line.startswith("- "):
                items.append(line[2:])
            elif items:
                items[-1] += "\n" + line
        elif "task" in section.lower():
            state_lines.append(line)
    events = []
    for item in reversed(items):
        item = re.sub(r"\s*\((?:success|failure)\)\.?\s*$", "", item.rstrip())
        item = _FOUND_BY.sub(r"\1", item)  # what another robot found reads as what was found
        if item.startswith("Warning: "):
            events.append(Event(item[len("Warning: "):], warning=True, failed=True))
        elif item.startswith(("Fact: ", "Procedure: ", "Goal history: ")):
            events.append(Event(item.split(": ", 1)[1]))
        else:
            event = _action_event(_AGO.sub("", item))
            event.recalled = True
            events.append(event)
    state = " ".join(state_lines)
    interrupted = re.search(r"Interrupted by: (.+?)\. When it is handled", state)
    if interrupted:
        events.append(Event(f"Interrupted by: {interrupted.group(1)}."))
    done = re.search(r"Done: (.+?)\.(?: Holding:|$)", state)
    if done:
        for step in re.split(r"\s*\d+\.\s+", " " + done.group(1)):
            if step.strip():
                events.append(Event("", action=step.strip()))
    holding = re.search(r"Holding: (.+?)\.", state)
    if holding:
        events.append(Event("You are holding " + holding.group(1) + "."))
    return events


def _action_event(text: str) -> Event:
    """Read a remembered action back as an event.

    A remembered trace: "take butter: You take the butter." (working) or "You take ... (success)".
    """
    failed = re.match(r"^([a-z][a-z0-9 -]*?) failed(?:: (.*))?$", text, re.S)
    if failed:
        return Event(failed.group(2) or "", action=failed.group(1), failed=True)
    m = re.match(r"^([a-z][a-z0-9 -]{1,60}?): (.*)$", text, re.S)
    if m and not m.group(1).startswith(("recipe", "ingredients", "directions", "interrupted")):
        return Event(m.group(2), action=m.group(1), failed=looks_failed(m.group(2)))
    return Event(text)


def looks_failed(text: str) -> bool:
    """Whether an action's result says it did not work ("You can't do that here.")."""
    low = text.lower()
    return any(w in low for w in _FAILED_WORDS)


def read_belief(task: str, events: Iterable[Event], wanted: Sequence[str] = ()) -> Belief:
    """Fold the events, oldest first, into a belief.

    ``wanted`` adds names to track beyond the ingredients written in the plan (tools, say).
    """
    b = Belief(task=task)
    events = list(events)
    for e in events:  # the plan first: the names to track come from it
        _read_plan(b, e.text)
    names = sorted({*b.ingredients, *wanted}, key=len, reverse=True)
    for e in events:
        _read_event(b, e, names)
    _order_from_failures(b)
    return b


def _read_plan(b: Belief, text: str) -> None:
    low = text.lower()
    if "directions:" not in low:
        return
    ingredients = re.search(r"ingredients:\s*\n(.*?)(?:\n\s*\n|directions:)", low, re.S)
    directions = re.search(r"directions:\s*\n(.*?)(?:\n\s*\n|$)", low, re.S)
    if directions:
        steps = [s.strip() for s in directions.group(1).splitlines() if s.strip()]
        if steps:
            b.plan = steps
    if ingredients:
        b.ingredients = [norm(s) for s in ingredients.group(1).splitlines() if s.strip()]


def _read_event(b: Belief, e: Event, names: Sequence[str]) -> None:
    low = e.text.lower()
    if e.action:
        a = norm(e.action)
        if e.failed:
            b.avoid.add(a)
            b.before.extend(_constraints(a, low))
        elif not looks_failed(low):
            b.done_actions.append(a)
            _add_result(b, low)
            if a.startswith("read") and "directions:" in low:
                b.read_room = b.room
    elif e.warning and low:
        m = re.match(r"^([a-z][a-z0-9 -]*?) failed(?:: (.*))?$", low, re.S) or \
            re.search(r"failed \(last failed step: ([a-z][a-z0-9 -]*?)(?:: (.*))?\)\.?$", low, re.S)
        if m:
            b.avoid.add(norm(m.group(1)))
            b.before.extend(_constraints(norm(m.group(1)), m.group(2) or ""))
    else:
        _add_result(b, low)
    if "directions:" in low and not b.read_room:
        b.read_room = b.room
    here = _HERE.findall(low)
    if here:
        _read_room(b, low, here[-1], names)
    for m in _OPENED.finditer(low):
        holder = m.group(1)
        b.closed.get(b.room, set()).discard(holder)
        for name in names:
            if b.where.get(name, ("", ""))[1] == holder:
                b.where.pop(name)
        for name in _names_in(m.group(2) or "", names):
            b.where[name] = (b.fixtures.get(holder, b.room), holder)
    for m in _TAKE.finditer(low):
        b.held.add(m.group(1))
        b.where.pop(m.group(1), None)
    for m in _DROP.finditer(low):
        b.held.discard(m.group(1))
        b.where[m.group(1)] = (b.room, m.group(2))
    if low.startswith(("you are carrying", "inventory:", "you are holding")):
        listed = re.sub(r"^(?:you are carrying|inventory:|you are holding)\s*", "", low.rstrip("."))
        b.held = {
            canonical(x)
            for x in re.split(r",\s*(?:and\s+)?|\s+and\s+|\n", listed)
            if canonical(x) and canonical(x) != "nothing"
        }
        b.held |= set(_names_in(listed, names))
    alarm = None if e.recalled else _ALARM.search(low)
    if alarm:
        b.alarm = (alarm.group(2), alarm.group(3).strip() or f"switch off the {alarm.group(1)}")
    still = None if e.recalled else _STILL.search(low)
    if still and b.alarm is None:
        b.alarm = (still.group(2), f"switch off the {still.group(1)}")
    interrupted = re.match(r"interrupted by: (.+)\.$", low)
    if interrupted and b.alarm is None:
        room = re.search(r"in the ([a-z][a-z ]*?)(?:[.,!]|$)", interrupted.group(1))
        b.alarm = (room.group(1) if room else "", interrupted.group(1))
    if b.alarm and re.search(r"you (?:switch|turn) off the|the ringing stops", low):
        b.alarm = None


def _add_result(b: Belief, low: str) -> None:
    """Keep what an action did, read from its result text.

    Keep what an action did ("you grill the carrot with the barbeque"): the first sentence of a text
    in the second person that is not a description of the room or the inventory.
    """
    if low.startswith("you ") and not low.startswith(("you are ", "you see ")):
        b.done_texts.append(re.split(r"(?<=[.!?])\s", low, maxsplit=1)[0])


def _read_room(b: Belief, low: str, room: str, names: Sequence[str]) -> None:
    b.room = room
    b.visited.add(room)
    start = low.rfind(f"you are in the {room}.")
    desc = low[start:]
    exits = _EXIT.findall(desc)
    if exits:
        b.exits[room] = {d: r for d, r in exits}
    body = desc.split("to the ", 1)[0]
    for phrase in _MENTION.findall(body):
        phrase = phrase.strip()
        if phrase and len(phrase.split()) <= 4:
            b.fixtures.setdefault(phrase, room)
            b.fixtures[phrase] = room
    b.closed[room] = set(_CLOSED.findall(body))
    for name in names:  # what was here and is not listed any more has gone
        where = b.where.get(name)
        if where and where[0] == room and where[1] not in b.closed[room]:
            b.where.pop(name)
    for holder, listed in _HOLDS.findall(body):
        holder = holder.strip()
        for name in _names_in(listed, names):
            b.where[name] = (room, holder)


def _names_in(text: str, names: Sequence[str]) -> list[str]:
    found, taken = [], text
    for name in names:  # longest first, so "bell pepper" does not also count as "pepper"
        pattern = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        if re.search(pattern, taken):
            found.append(name)
            taken = re.sub(pattern, " ", taken)
    return found


def _constraints(action: str, explanation: str) -> list[tuple[str, str]]:
    """Orderings a failure teaches, in the failure's own words.

    "... before the cheese" -> the step naming the cheese goes first; "... while it is switched on"
    -> this step goes before the one that switches it on.
    """
    out = []
    before = re.search(r"\bbefore the ([a-z][a-z ]*?)[.,!]", explanation)
    if before:
        out.append((before.group(1), action))
    while_on = re.search(
        r"\bwhile (?:it|the ([a-z][a-z ]*?)) (?:is|was) (?:switched |turned )?on\b", explanation)
    if while_on:
        out.append((action, "switch on"))
    return out


def _order_from_failures(b: Belief) -> None:
    plan = list(b.plan)
    for first, then in b.before:
        fi = next((i for i, s in enumerate(plan) if first in norm(s)), None)
        ti = next((i for i, s in enumerate(plan) if then in norm(s)), None)
        if fi is not None and ti is not None and fi > ti:
            plan.insert(ti, plan.pop(fi))
    b.plan = plan
