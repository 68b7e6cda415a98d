"""The scripted planner: a generic text agent with no memory of its own.

Each decision is a function of what it is shown (task, observation, valid actions, the window of
recent steps, the memory prompt) plus a seeded coin for breaking ties while exploring; nothing from
one step survives to the next. So the three evaluation conditions differ only in what the planner is
shown, which is what they are meant to measure.

What it knows beyond the texts is common sense any cook has, the same for every environment: cutting
needs a knife, frying happens on a stove, grilling on a barbeque, roasting in an oven
(``COMMON_SENSE``). It knows nothing of any game's layout or solution and never reads an
environment's internals.

Priorities, each step: a ringing alarm first (go there, switch it off); without a written plan, read
one (or go to where the task says it is, or explore); take any wanted thing within reach; then do
the first step of the plan not yet done, respecting orders learned from remembered failures,
fetching what it needs and going where it can be done; when the plan is done, the action that best
answers the task ("eat meal").
"""
from __future__ import annotations

import random
import re
from collections import deque
from typing import Optional

from brainmem_ros.planning.base import PlannerError, PlanningContext
from brainmem_ros.planning.reading import (ROUTINE_VERBS, Belief, Event, memory_events, norm,
                                           read_belief)

__all__ = ["ScriptedPlanner", "COMMON_SENSE"]

COMMON_SENSE = {
    "tools": {
        "slice": "knife",
        "dice": "knife",
        "chop": "knife",
        "cut": "knife",
        "spread": "knife",
        "peel": "knife"
    },
    "appliances": {
        "fry": ("stove", "pan"),
        "grill": ("barbeque", "bbq", "grill", "toaster"),
        "roast": ("oven", ),
        "bake": ("oven", ),
        "toast": ("toaster", ),
        "boil": ("stove", "kettle"),
        "microwave": ("microwave", )
    },
    # what a task's words ask of the one who reads it: "you are hungry ... enjoy your meal" -> eat
    "wishes": {
        "hungry": "eat",
        "enjoy": "eat",
        "thirsty": "drink",
        "tired": "sleep"
    },
}
_STOP = {"with", "in", "on", "under", "into", "onto", "from", "of", "to", "and", "at"}


class ScriptedPlanner:
    name = "scripted"

    def __init__(self, seed: int = 0):
        self.reset(seed)

    def reset(self, seed: int) -> None:
        """Start a new episode: only the exploration coin is re-seeded.

        A new episode: only the exploration coin is re-seeded; there is nothing else to forget.
        """
        self.rng = random.Random(seed)

    # -- what to ask the memory ------------------------------------------------------------
    def memory_queries(self, context: PlanningContext) -> list[str]:
        """Return the questions this step needs answered: the plan, then where the next thing is."""
        belief = self._belief(context)
        queries = [f"recipe directions ingredients: {context.task}"]
        step = self._next_step(belief)
        if step:
            queries.append(step)
            missing = [n for n in self._needs(belief, step) if n not in belief.held]
            if missing:
                queries.append(f"where is the {missing[0]}?")
            elif self._place_for(belief, step) is None and self._fixtures_for(belief, step):
                queries.append(f"where is the {self._fixtures_for(belief, step)[0]}?")
        if belief.alarm:
            queries.append(f"{belief.alarm[1]} in the {belief.alarm[0]}")
        if belief.room:  # the way on from here, and which rooms beyond were seen already
            queries.append(
                f"You are in the {belief.room}. To the north, south, east and west you see")
        return queries

    # -- deciding ----------------------------------------------------------------------------
    def decide(self, context: PlanningContext) -> str:
        if not context.valid_actions:
            raise PlannerError("the environment offers no valid action")
        valid = {norm(a): a for a in context.valid_actions}
        belief = self._belief(context)
        action = (self._alarm(belief, valid) or self._look_in_hands(belief, valid)
                  or self._read_plan(belief, valid, context.task)
                  or self._pick_up(belief, valid) or self._follow_plan(belief, valid)
                  or self._finish(belief, valid, context.task) or self._explore(belief, valid))
        return action

    def _belief(self, context: PlanningContext) -> Belief:
        events = memory_events(context.memory_prompt)
        for action, observation in context.window:
            events.append(Event(observation, action=action))
        events.append(Event(context.observation))
        return read_belief(context.task, events, wanted=sorted(set(COMMON_SENSE["tools"].values())))

    def _alarm(self, b: Belief, valid: dict) -> Optional[str]:
        if not b.alarm:
            return None
        room, todo = b.alarm
        match = valid.get(norm(todo)) or next(
            (a for n, a in valid.items()
             if n and n in norm(todo) and n.split()[0] not in ROUTINE_VERBS), None)
        if match:
            return match
        if room and room != b.room:
            return self._go(b, valid, room)
        return None  # here and nothing to switch off: it was dealt with

    @staticmethod
    def _look_in_hands(b: Belief, valid: dict) -> Optional[str]:
        """Look at what is carried before using it (it may be cooked already), once it is there."""
        if b.inventory_seen or not _in_hand(valid) - b.held or "inventory" not in valid:
            return None
        return valid["inventory"]

    def _read_plan(self, b: Belief, valid: dict, task: str) -> Optional[str]:
        if b.plan:
            return None
        readable = [a for n, a in valid.items() if n.startswith("read ") or (
            n.startswith("examine ") and any(w in n for w in ("cookbook", "recipe")))]
        if readable:
            named = [a for a in readable if norm(a).split(" ", 1)[1] in norm(task)]
            return (named or readable)[0]
        room = self._task_room(b)
        if room and room != b.room:
            return self._go(b, valid, room)
        return None

    def _wanted(self, b: Belief) -> list[str]:
        """Return everything the rest of the plan needs in hand.

        Everything the rest of the plan needs in hand; all the ingredients until the plan is done (a
        written list of ingredients is a list of things to gather).
        """
        wanted = []
        nxt = self._next_step(b)
        for step in b.plan[b.plan.index(nxt):] if nxt else []:
            wanted += [n for n in self._needs(b, step) if n not in wanted]
        if self._next_step(b) is not None:
            wanted += [i for i in b.ingredients if i not in wanted]
        return wanted

    def _pick_up(self, b: Belief, valid: dict) -> Optional[str]:
        """Take what is wanted; with full hands only what the next step needs, making room first."""
        step = self._next_step(b)
        now = self._needs(b, step) if step else []
        full = b.capacity is not None and len(b.held) >= b.capacity
        last = b.done_actions[-1] if b.done_actions else ""
        for name in self._wanted(b):
            take = _take(valid, name)
            if name in b.held or take is None or \
                    last.startswith((f"put {name} ", f"drop {name}", f"insert {name} ")):
                continue  # not what was put down a moment ago to make room
            if not full:
                return take
            if name in now:
                return self._make_room(b, valid, keep=now)
        if any(n.startswith("take ") for n in valid):
            return None
        for name in now:  # needed now and here, yet nothing at all may be taken: hands are full
            where = b.where.get(name)
            if name not in b.held and where and where[0] == b.room and _take(valid, name) is None \
                    and where[1] not in b.closed.get(b.room, ()):
                return self._make_room(b, valid, keep=now)
        return None

    def _make_room(self, b: Belief, valid: dict, keep: list[str]) -> Optional[str]:
        """Put down what is not wanted, else what the plan needs last; never what is needed now."""
        wanted = self._wanted(b)
        held = b.held | _in_hand(valid)
        spare = sorted(held - set(keep),
                       key=lambda n: (n in wanted, -wanted.index(n) if n in wanted else 0, n))
        for name in spare:
            put = sorted(a for n, a in valid.items()
                         if n == f"drop {name}" or n.startswith(f"put {name} "))
            if put:
                return put[0]
        return None

    def _needs(self, b: Belief, step: str) -> list[str]:
        """Return what must be in hand for a step.

        What must be in hand for a step: the ingredients it names (all of them if it names none, as
        in "prepare meal") and the tool common sense says its verb needs.
        """
        s = norm(step)
        needs = [i for i in b.ingredients if _names(i, s)]
        if not needs:  # "fill the machine with water" needs the water jug
            words = set(s.split()[1:]) - _STOP
            needs = [i for i in b.ingredients if words & set(i.split())]
        if not needs and s.split()[0] in ("prepare", "make", "assemble"):
            needs = list(b.ingredients)
        tool = COMMON_SENSE["tools"].get(s.split()[0])
        if tool:
            needs.append(tool)
        return needs

    def _next_step(self, b: Belief) -> Optional[str]:
        """Return the first step not done.

        The first step not done, where a step counts as done when it or any later step is (a plan is
        followed in order, so "prepare meal" done means the cutting before it was too).
        """
        done = [self._done(b, s) for s in b.plan]
        last = max((i for i, s in enumerate(b.plan) if self._done(b, s, by_hand=True)),
                   default=-1)
        for i, step in enumerate(b.plan):
            if i > last and not done[i]:
                return step
        return None

    @staticmethod
    def _carries_out(step: str, action: str) -> bool:
        """Tell whether a (normalised) action carries out a step.

        Whether a (normalised) action carries out a step: the same words, the step's verb on its
        object ("dice the banana" / "dice banana"), or cooking on the appliance its verb needs
        ("grill the carrot" / "cook carrot in barbeque").
        """
        s = norm(step)
        if action == s:
            return True
        verb, obj = s.split()[0], " ".join(s.split()[1:])
        if not obj or obj not in action:
            return False
        if action.startswith(verb + " "):
            return True
        return action.startswith("cook ") and any(
            action.endswith(f" {a}") for a in COMMON_SENSE["appliances"].get(verb, ()))

    def _done(self, b: Belief, step: str, by_hand: bool = False) -> bool:
        return b.step_done(step, by_hand) or any(self._carries_out(step, a)
                                                 for a in b.done_actions)

    def _realize(self, b: Belief, step: str, valid: dict) -> Optional[str]:
        s = norm(step)
        if s in valid:
            return valid[s]
        options = [
            a for n, a in sorted(valid.items()) if n not in b.avoid and self._carries_out(step, n)
        ]
        return options[0] if options else None

    def _follow_plan(self, b: Belief, valid: dict) -> Optional[str]:
        step = self._next_step(b)
        if step is None:
            return None
        said = _in_hand(valid)  # when the valid actions say what is held, trust them over belief
        missing = [n for n in self._needs(b, step) if n not in (b.held | said)]
        action = None if missing and said else self._realize(b, step, valid)
        if action:
            return action
        for name in missing:
            return self._fetch(b, valid, name)
        place = self._place_for(b, step)
        if place and place != b.room:
            return self._go(b, valid, place)
        if place is None and self._fixtures_for(b, step):
            return self._explore(b,
                                 valid)  # the fixture it needs has not been seen (or is forgotten)
        home = b.read_room or self._task_room(b)
        if place is None and home and home != b.room:  # nothing named: work where the plan lives
            return self._go(b, valid, home)
        return None

    def _task_room(self, b: Belief) -> str:
        room = re.search(r"\bin the ([a-z][a-z ]*?)(?:\b(?:for|says|to)\b|[.,!])", b.task.lower())
        return room.group(1).strip() if room else ""

    def _fixtures_for(self, b: Belief, step: str) -> list[str]:
        """Return the fixtures a step names or its verb needs, longest phrases first.

        Fixtures a step names ("in the sink", "wipe the counter") or its verb needs (grill:
        barbeque), longest phrases first.
        """
        s = norm(step)
        for name in sorted(b.ingredients, key=len, reverse=True):
            s = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", " | ", s)
        candidates = list(COMMON_SENSE["appliances"].get(s.split()[0], ()))
        for chunk in re.split(r"\s*\|\s*|\b(?:with|in|on|under|into|onto|from|at)\b",
                              " ".join(s.split()[1:])):
            phrase = " ".join(w for w in chunk.split() if w not in _STOP)
            if phrase:
                candidates.append(phrase)
        return [c for c in candidates if c not in ("meal", "salad", "sandwich", "coffee")]

    def _place_for(self, b: Belief, step: str) -> Optional[str]:
        """Return the room of the first fixture of the step seen so far, or None."""
        for phrase in self._fixtures_for(b, step):
            if phrase in b.fixtures:
                return b.fixtures[phrase]
            for seen, room in sorted(b.fixtures.items()):
                if seen.endswith(" " + phrase):
                    return room
        return None

    def _fetch(self, b: Belief, valid: dict, name: str) -> Optional[str]:
        where = b.where.get(name)
        if where:
            room, holder = where
            if room == b.room:
                if holder and f"open {holder}" in valid:
                    return valid[f"open {holder}"]
            else:
                return self._go(b, valid, room)
        return self._explore(b, valid)

    def _finish(self, b: Belief, valid: dict, task: str) -> Optional[str]:
        if not b.plan or self._next_step(b) is not None:
            return None
        task_words = set(norm(task).split())
        wished = {COMMON_SENSE["wishes"][w] for w in task_words if w in COMMON_SENSE["wishes"]}
        best, score = None, 0
        for n, a in sorted(valid.items()):
            verb = n.split()[0]
            if verb in ROUTINE_VERBS or verb in ("put", "drop") or n in b.done_actions:
                continue
            overlap = len(task_words & set(n.split())) + 2 * (verb in wished)
            if overlap > score:
                best, score = a, overlap
        return best

    # -- getting about ----------------------------------------------------------------------
    def _go(self, b: Belief, valid: dict, room: str) -> Optional[str]:
        path = _path(b.exits, b.room, room)
        if path:
            move = self._move(b, valid, path[0])
            if move:
                return move
        return self._explore(b, valid)

    @staticmethod
    def _move(b: Belief, valid: dict, direction: str) -> Optional[str]:
        """Move that way, opening the door first when one is closed there."""
        if direction in b.shut.get(b.room, ()):
            named = b.doors.get(b.room, {}).get(direction, "")
            for door in (f"open door to {direction}", f"open {named}" if named else ""):
                if door in valid:
                    return valid[door]
        return valid.get(f"move {direction}") or valid.get(f"go {direction}")

    def _explore(self, b: Belief, valid: dict) -> str:
        """Choose an exploring move.

        Open what is closed here; else head for the nearest room known but not yet seen (or one with
        something still closed); else wander.
        """
        for container in sorted(b.closed.get(b.room, ())):
            if f"open {container}" in valid:
                return valid[f"open {container}"]
        unlooked = sorted(a for n, a in valid.items()  # a container not yet looked into
                          if n.startswith("open ") and "door" not in n and n[5:] not in b.opened
                          and _names(n[5:], b.seen_here.get(b.room, ""))
                          and n not in b.done_actions and n not in b.avoid)
        if unlooked:
            return unlooked[0]
        ways = {n.split()[-1] for n in valid if n.startswith(("move ", "go "))}
        ways = [d for d in sorted(ways | b.shut.get(b.room, set())) if self._move(b, valid, d)]
        if not ways:  # nowhere to go: look about, never anything that cannot be undone
            options = sorted(a for n, a in valid.items() if n.split()[0] in ("look", "examine"))
            return self.rng.choice(options or sorted(valid.values()))
        exits = b.exits.get(b.room, {})
        fresh = [d for d in ways if exits.get(d) not in b.visited]
        if fresh:
            return self._move(b, valid, self.rng.choice(fresh))
        frontier = {r for doors in b.exits.values() for r in doors.values()
                    if r is not None and r not in b.visited}
        frontier |= {r for r, shut in b.closed.items() if shut and r != b.room}
        frontier |= {  # a way out not yet taken
            r for r, doors in b.exits.items() if r != b.room and None in doors.values()}
        frontier |= {  # a closed door not yet looked behind
            r for r, doors in b.shut.items()
            if r != b.room and any(d not in b.exits.get(r, {}) for d in doors)
        }
        best = None
        for room in sorted(frontier):
            path = _path(b.exits, b.room, room)
            if path and (best is None or len(path) < len(best)):
                best = path
        if best and self._move(b, valid, best[0]):
            return self._move(b, valid, best[0])
        return self._move(b, valid, self.rng.choice(ways))


def _in_hand(valid: dict) -> set[str]:
    """Return what the valid actions say is held: only a thing in hand can be put down."""
    held = set()
    for n in valid:
        m = re.match(r"(?:drop (.+)|(?:put|insert) (.+?) (?:in|on|into|onto) .+)$", n)
        if m:
            held.add(m.group(1) or m.group(2))
    return held


def _take(valid: dict, name: str) -> Optional[str]:
    """Return the valid action that takes ``name`` ("take knife", "take knife from counter")."""
    if f"take {name}" in valid:
        return valid[f"take {name}"]
    return next((a for n, a in sorted(valid.items()) if n.startswith(f"take {name} from ")), None)


def _names(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def _path(exits: dict, start: str, goal: str) -> Optional[list[str]]:
    """Directions from start to goal over the exits known so far (breadth first), or None."""
    if start == goal:
        return []
    seen, queue = {start}, deque([(start, [])])
    while queue:
        room, path = queue.popleft()
        for direction, nxt in sorted(exits.get(room, {}).items()):
            if nxt is None:
                continue
            if nxt == goal:
                return path + [direction]
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, path + [direction]))
    return None
