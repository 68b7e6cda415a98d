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
_HEADER = re.compile(r"^-= ([a-z][a-z ]*?) =-", re.M)  # a room's name as its title
_WAY = re.compile(r"\b(?:exit|entranceway|going|leading) (?:to the )?(north|south|east|west)\b")
_NAMED_SHUT = re.compile(r"\bclosed ([a-z][a-z -]*?door) leading (north|south|east|west)\b")
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
_EXIT = re.compile(r"to the (north|south|east|west) you see the ([a-z][a-z ]*?)(?:\.|$)")
_SHUT = re.compile(r"to the (north|south|east|west) you see an? closed [a-z -]*?door\b")
_REVEAL = re.compile(r"you open the [a-z -]*?door, revealing the ([a-z][a-z ]*?)(?:\.|$)")
_DOOR_CLOSED = re.compile(r"\bdoor is closed\b|\bopen (?:the )?([a-z][a-z -]*?door) first\b")
_CAPACITY = re.compile(r"maximum capacity is (\d+) items|has (\d+) items,? and is full")
_MENTION = re.compile(
    r"\b(?:a|an|some) (?:closed |open |opened )?([a-z][a-z -]*?)"
    r"(?= that\b|,| and\b|\.|$| on it| pinned\b|!|\?| nearby\b| close by\b| is\b)")
_HOLDS = re.compile(
    r"\b(?:a|an|some) (?:open )?([a-z][a-z -]*?),? that (?:has|contains) (.+?)(?: on "
    r"it)?(?=[.;]|, (?:a|an) [a-z -]+ that|, and (?:a|an) |$)")
_OPENED = re.compile(
    r"you open the ([a-z][a-z ]*?)\.\s*(?:the [a-z ]+ contains (.+?)\.|it(?: is|'s) empty)")
_CLOSED = re.compile(r"\b(?:a|an) ([a-z][a-z -]*?) that is closed|\ba closed ([a-z][a-z -]*?)"
                     r"(?= is\b| nearby\b| close by\b| in the room\b| here\b|[.,!])")
_REVEALING = re.compile(r"you open the ([a-z][a-z -]*?), revealing (.+?)[.!]")
_SHOWN_ON = re.compile(r"\b(?:on|in) the ([a-z][a-z -]*?),? you (?:can )?(?:see|make out|find) "
                       r"(.+?)[.!]")
_SEEN_ON = re.compile(
    r"\byou (?:can )?(?:see|make out) ([^.!?]+?) (?:on|in) the ([a-z][a-z -]*?)[.!]")
_TAKE = re.compile(r"you (?:take|pick up) the ([a-z][a-z -]*?)(?: from the [a-z ]+)?"
                   r"(?:\.|$| \(success\))")
_DROP = re.compile(
    r"you (?:drop|put) the ([a-z][a-z -]*?) (?:in|on|into|onto) the ([a-z][a-z -]*?)(?:\.|$| "
    r"\(success\))")
_ALARM = re.compile(
    r"an? ([a-z][a-z ]*?) (?:rings|is ringing|beeps|goes off|is beeping) in the ([a-z][a-z "
    r"]*?)[!.]\s*([^.!\n]*)")
_STILL = re.compile(r"the ([a-z][a-z ]*?) is still (?:ringing|beeping) in the ([a-z][a-z ]*?)\.")
_FAILED_WORDS = ("you can't", "unknown action", "not sure what you mean", "failed",
                 "nothing happens", "you don't", "there is no", "still miss", "still needs",
                 "first.")
_AGO = re.compile(
    r"^(?:just now|\d+ s ago|\d+ min ago|\d+ h ago|\d+ days ago)(?: \(([^)\n]+)\))?:\s*")


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
    place: str = ""  # where a recalled action was taken, when the memory knows


@dataclass
class Belief:
    task: str = ""
    plan: list[str] = field(default_factory=list)
    ingredients: list[str] = field(default_factory=list)
    room: str = ""
    # the room as the shown steps alone tell it: a recalled memory of another time must not
    # become the place the next shown step was taken from
    here: str = ""
    visited: set = field(default_factory=set)
    exits: dict = field(default_factory=dict)  # room -> {direction: room}
    shut: dict = field(default_factory=dict)  # room -> directions behind a closed door
    doors: dict = field(default_factory=dict)  # room -> {direction: the door's name}
    opened: set = field(default_factory=set)  # containers seen opened
    seen_here: dict = field(default_factory=dict)  # room -> its last description
    seen_texts: list = field(default_factory=list)  # every text shown, lower case
    inventory_seen: bool = False  # a text listed what is in hand
    capacity: Optional[int] = None  # how many things fit in hand, once a text has said
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

    def step_done(self, step: str, by_hand: bool = False) -> bool:
        """Tell whether a result text says the step was done, or that its thing is in that state.

        "You chop the pork chop" is the step done by hand; "a roasted red onion" is a thing already
        in the state the step would make, so that step needs no doing. ``by_hand``: the first kind
        only (only a step done by hand says the plan was followed that far).
        """
        s = norm(step)
        if s in self.done_actions:
            return True
        words = s.split()
        verb, rest = words[0], " ".join(words[1:])
        if not rest:
            return False
        past = {verb + "d", verb + "ed", verb + verb[-1] + "ed",
                verb[:-1] + "ied" if verb.endswith("y") else verb + "ed"}
        forms = past | {verb, verb + "s"}
        thing = rf"{re.escape(rest)}(?![\w-])"
        # The verb, then the thing: "you take the pork chop" does not chop it; commas kept, so
        # "a pork chop, a pepper" does not chop the pepper.
        done = re.compile(rf"\byou (?:{'|'.join(map(re.escape, forms))})\b(?: [\w-]+){{0,2}}? "
                          + thing)
        already = re.compile(  # "a diced roasted pepper", "a chopped raw potato"
            rf"(?<!you )\b(?:{'|'.join(map(re.escape, past))})(?: [a-z]+){{0,2}}? " + thing)
        flat = [" ".join(_ARTICLES.sub("", text.lower()).split()) for text in self.done_texts]
        if any(done.search(low) for low in flat):
            return True
        return not by_hand and any(already.search(" ".join(_ARTICLES.sub("", t).split()))
                                   for t in self.seen_texts)


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
            ago = _AGO.match(item)
            event = _action_event(item[ago.end():] if ago else item)
            event.recalled = True
            event.place = norm(ago.group(1)) if ago and ago.group(1) else ""
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
    if _HEADER.match(low) or low.startswith("you are in the "):
        return False  # a room described ("... there is no door") is not a failure
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
    b.seen_texts.append(low)
    origin = e.place if e.recalled else b.here  # where the action was taken, if known
    if origin:
        b.room = origin
    if e.action:
        a = norm(e.action)
        if origin or not e.recalled:  # a shown step's door counts even before its room is said
            _read_door(b, a, low)
        if e.failed:
            b.avoid.add(a)
            b.before.extend(_constraints(a, low, b.plan))
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
            b.before.extend(_constraints(norm(m.group(1)), m.group(2) or "", b.plan))
    else:
        _add_result(b, low)
    if "directions:" in low and not b.read_room:
        b.read_room = b.room
    here = _HERE.findall(low) or _HEADER.findall(low)
    if here:
        if e.action and origin:
            _link(b, norm(e.action), here[-1])
        _read_room(b, low, here[-1], names)
        if not e.recalled:
            b.here = here[-1]
    for m in [*_OPENED.finditer(low), *_REVEALING.finditer(low)]:
        holder = m.group(1)
        b.closed.get(b.room, set()).discard(holder)
        b.opened.add(holder)
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
    capacity = _CAPACITY.search(low)
    if capacity:
        b.capacity = int(capacity.group(1) or capacity.group(2))
    if low.startswith(("you are carrying", "inventory", "you are holding")):
        listed = re.sub(r"^(?:you are carrying|inventory(?: \(maximum capacity is \d+ items\))?:|"
                        r"you are holding)\s*", "", low.rstrip("."))
        b.inventory_seen = True
        held = set()
        for item in re.split(r",\s*(?:and\s+)?|\s+and\s+|\n", listed):
            thing = canonical(item)
            if thing and thing != "nothing":  # "a raw purple potato" is the purple potato
                held.add((_names_in(thing, names) or [thing])[0])
        b.held = held
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
    if low.startswith("you ") and not low.startswith(("you are ", "you see ")) and \
            "directions:" not in low:  # what a recipe says to do is not done by reading it
        b.done_texts.append(re.split(r"(?<=[.!?])\s|\n", low, maxsplit=1)[0])


def _read_room(b: Belief, low: str, room: str, names: Sequence[str]) -> None:
    b.room = room
    b.visited.add(room)
    start = max(low.rfind(f"you are in the {room}."), low.rfind(f"-= {room} =-"))
    desc = low[start:]
    b.seen_here[room] = desc
    named = {d: door for door, d in _NAMED_SHUT.findall(desc)}
    shut = set(_SHUT.findall(desc)) | set(named)
    b.doors.setdefault(room, {}).update(named)
    known = b.exits.get(room, {})
    exits = {d: r for d, r in _EXIT.findall(desc)}
    for d in [*_WAY.findall(desc), *shut]:  # a way out whose room is learnt by going through
        exits.setdefault(d, known.get(d))
    exits.update({d: known[d] for d in shut if known.get(d)})  # a closed door hides a known room
    for d, r in known.items():  # a way learnt by going stays known
        exits.setdefault(d, r)
    if exits:
        b.exits[room] = exits
    b.shut[room] = shut
    body = re.split(r"(?:through an open [a-z -]+, )?to the (?:north|south|east|west) you see|"
                    r"\n\s*\n(?=there is (?:a|an) (?:exit|closed|open))", desc, maxsplit=1)[0]
    for phrase in _MENTION.findall(body):
        phrase = phrase.strip()
        if phrase and len(phrase.split()) <= 4:
            b.fixtures.setdefault(phrase, room)
            b.fixtures[phrase] = room
    b.closed[room] = {a or c for a, c in _CLOSED.findall(body) if "door" not in (a or c)}
    for name in names:  # what was here and is not listed any more has gone
        where = b.where.get(name)
        if where and where[0] == room and where[1] not in b.closed[room]:
            b.where.pop(name)
    shown = [*_HOLDS.findall(body), *_SHOWN_ON.findall(body),
             *((h, listed) for listed, h in _SEEN_ON.findall(body))]
    for holder, listed in shown:
        holder = holder.strip()
        for name in _names_in(listed, names):
            b.where[name] = (room, holder)
    for name in _names_in(" ".join(re.findall(r"there is (.+?) on the floor", desc)), names):
        b.where[name] = (room, "")


def _link(b: Belief, action: str, room: str) -> None:
    """Join two rooms, both ways, when going a way arrived somewhere."""
    direction = action.rsplit(" ", 1)[-1]
    if action.split()[0] not in ("go", "move") or direction not in _OPPOSITE or not b.room:
        return
    if room != b.room:
        b.exits.setdefault(b.room, {})[direction] = room
        back = b.exits.setdefault(room, {})
        if not back.get(_OPPOSITE[direction]):  # a way seen but not yet gone through
            back[_OPPOSITE[direction]] = b.room


def _read_door(b: Belief, action: str, low: str) -> None:
    """Learn from opening a door (the room it reveals) or walking into a closed one."""
    direction = action.rsplit(" ", 1)[-1]
    doors = b.doors.get(b.room, {})
    if action.startswith("open ") and action[5:] in doors.values() and \
            re.search(r"\byou open\b|already open", low):  # a door named, not by its way
        for way in [d for d, door in doors.items() if door == action[5:]]:
            b.shut.get(b.room, set()).discard(way)
        return
    if direction not in ("north", "south", "east", "west"):
        return
    revealed = _REVEAL.search(low)
    if action.startswith("open ") and (revealed or "already open" in low):
        if revealed:
            b.exits.setdefault(b.room, {})[direction] = revealed.group(1)
        b.shut.get(b.room, set()).discard(direction)
    elif action.startswith(("move ", "go ")) and _DOOR_CLOSED.search(low):
        b.shut.setdefault(b.room, set()).add(direction)
        door = _DOOR_CLOSED.search(low).group(1)
        if door:
            b.doors.setdefault(b.room, {})[direction] = door


def _names_in(text: str, names: Sequence[str]) -> list[str]:
    found, taken = [], text
    for name in names:  # longest first, so "bell pepper" does not also count as "pepper"
        pattern = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        if re.search(pattern, taken):
            found.append(name)
            taken = re.sub(pattern, " ", taken)
    return found


_TOO_EARLY = ("before", "without", "until", "yet")  # what the clause names had not happened
_TOO_LATE = ("while", "after", "already", "still")  # what the clause names had happened already
_CUE = re.compile(rf"\b({'|'.join(_TOO_EARLY + _TOO_LATE)})\b([^.!;]*)")
_FILLER = {"the", "a", "an", "some", "it", "is", "was", "with", "in", "on", "into", "onto", "from",
           "of", "to", "and", "at", "off"}


def _constraints(action: str, explanation: str, plan: Sequence[str]) -> list[tuple[str, str]]:
    """Orderings a failure teaches, read from the failure's own words about the other steps.

    A clause of the failure message that names another step of the plan (a word of that step that
    the failed step does not have, in any form: "switch" / "switched") orders the two: "before the
    cheese", "without ...", "until ..." say that step had not happened and goes first; "while it is
    switched on", "after ...", "already ..." say it had, and the failed step goes before it.
    """
    out = []
    own = set(action.split())
    for cue, clause in _CUE.findall(explanation):
        for step in plan:
            s = norm(step)
            keys = [w for w in s.split() if w not in own and w not in _FILLER]
            if s == action or not keys or not any(_said(k, clause) for k in keys):
                continue
            out.append((s, action) if cue in _TOO_EARLY else (action, s))
    return out


def _said(word: str, text: str) -> bool:
    forms = {word, word + "s", word + "d", word + "ed", word + word[-1] + "ed", word + "ing"}
    return any(re.search(rf"\b{re.escape(f)}\b", text) for f in forms)


def _order_from_failures(b: Belief) -> None:
    plan = list(b.plan)
    for first, then in b.before:
        fi = next((i for i, s in enumerate(plan) if first in norm(s)), None)
        ti = next((i for i, s in enumerate(plan) if then in norm(s)), None)
        if fi is not None and ti is not None and fi > ti:
            plan.insert(ti, plan.pop(fi))
    b.plan = plan
