"""Walks through Microsoft TextWorld cooking games, with the true state of the world at every step.

The games come from TextWorld's own generator (``tw-make tw-cooking``, the First TextWorld Problems
kitchens), made from a seed and tw-make's own options, and cached. A seeded explorer walks each game
the way a robot wanders a house: moving, opening, taking and putting things down, sometimes trying
what cannot be done, with errands it is given and an interruption now and then. After every step the
engine's facts (``EnvInfos(facts=True)``) say where every object is and what is open; nothing here
reads the texts to find the truth.
"""
from __future__ import annotations

import hashlib
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from brainmem_ros.core.errors import BrainMemError

__all__ = ["TW_OPTIONS", "Step", "Walk", "make_game", "walk_game", "clean_feedback",
           "player_room"]

TW_OPTIONS = {"recipe": 3, "take": 3, "go": 6, "open": 1, "cook": 1, "cut": 1, "drop": 0}
CACHE = Path.home() / ".cache" / "brainmem_ros" / "textworld"
PORTABLE = ("f", "o", "k")  # food, object, key: the things that move
OPENABLE = ("c", "d")  # containers and doors


@dataclass
class Step:
    index: int
    action: str  # "" for the first look around
    text: str  # what the engine answered, cleaned
    success: bool
    place: dict  # object -> "held", "floor" or the container/supporter holding it
    state: dict  # container or door -> "open", "closed" or "locked"
    room: str
    goal: str = ""  # the errand in force
    interruption: str = ""  # set on the step an interruption starts
    resolved: bool = False  # the interruption was dealt with on this step


@dataclass
class Walk:
    game: str
    seed: int
    task: str
    steps: list = field(default_factory=list)
    holders: set = field(default_factory=set)  # every container and supporter name


def make_game(seed: int, options: Optional[dict] = None, folder: Path = CACHE) -> Path:
    """Return a tw-cooking game made by TextWorld's generator (cached by seed and options)."""
    options = dict(TW_OPTIONS, **(options or {}))
    unknown = set(options) - set(TW_OPTIONS)
    if unknown:
        raise BrainMemError(f"unknown tw-cooking option(s) {sorted(unknown)}; "
                            f"known: {', '.join(TW_OPTIONS)}")
    tag = hashlib.sha1(repr(sorted(options.items())).encode()).hexdigest()[:8]
    path = folder / f"tw-cooking-{tag}-s{seed}.z8"
    if path.exists():
        return path
    tw_make = shutil.which("tw-make") or str(Path(sys.executable).parent / "tw-make")
    if not Path(tw_make).exists():
        raise BrainMemError("TextWorld is not installed (pip install textworld): no tw-make")
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [tw_make, "tw-cooking", "--seed", str(seed), "--output", str(path), "--silent"]
    for name, value in options.items():
        if name in ("recipe", "take", "go"):
            cmd += [f"--{name}", str(int(value))]
        elif int(value):
            cmd.append(f"--{name}")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not path.exists():
        raise BrainMemError(f"tw-make failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return path


def clean_feedback(text: str, paragraphs: bool = False) -> str:
    """Drop the banner and the status line; keep what a player reads.

    ``paragraphs`` keeps the blank lines between paragraphs, which a reader of room descriptions
    uses to tell the room from its exits.
    """
    text = re.split(r"\n>\s", text or "")[0]
    lines = [ln.rstrip() for ln in text.splitlines() if "$$" not in ln]
    if not paragraphs:
        return "\n".join(ln.strip() for ln in lines if re.search(r"[A-Za-z]", ln)).strip()
    lines = [ln if re.search(r"[A-Za-z]", ln) else "" for ln in lines]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def player_room(facts) -> str:
    """Return the room the engine's facts put the player in (``at(P, room)``); "" if none."""
    for fact in facts:
        if fact.name == "at" and len(fact.arguments) == 2 and fact.arguments[0].type == "P":
            return fact.arguments[1].name
    return ""


def _truth(facts) -> tuple[dict, dict, str, set]:
    place, state, holders = {}, {}, set()
    for fact in facts:
        args = [(a.name, a.type) for a in fact.arguments]
        if fact.name in ("in", "on", "at") and args[0][1] in PORTABLE:
            target, kind = args[1]
            place[args[0][0]] = ("held" if target == "I" else "floor" if kind == "r" else target)
        elif fact.name in ("open", "closed", "locked") and args and args[0][1] in OPENABLE:
            state[args[0][0]] = fact.name
        if fact.name in ("in", "on") and args[1][1] in ("c", "s"):
            holders.add(args[1][0])
        if fact.name == "at" and args[0][1] in ("c", "s"):
            holders.add(args[0][0])
    return place, state, player_room(facts), holders


_WEIGHTS = (("go ", 5), ("open ", 3), ("close ", 1), ("take ", 4), ("put ", 2), ("insert ", 2),
            ("drop ", 1), ("examine ", 1), ("look", 1), ("inventory", 1))
_NEVER = ("eat ", "drink ", "prepare ", "cook ", "slice ", "dice ", "chop ", "lock ", "unlock ")
_DIRECTIONS = ("north", "south", "east", "west")


def _choose(rng: random.Random, admissible: list[str], place: dict, room_things: set) -> str:
    """Pick the explorer's next action; about one in twelve is something that cannot be done."""
    if rng.random() < 0.08:
        elsewhere = sorted(x for x in place if x not in room_things and place[x] != "held")
        exits = {a.split()[1] for a in admissible if a.startswith("go ")}
        walls = [d for d in _DIRECTIONS if d not in exits]
        options = [f"take {x}" for x in elsewhere[:6]] + [f"go {d}" for d in walls]
        if options:
            return rng.choice(options)
    pool = [(a, w) for a in admissible if not a.startswith(_NEVER)
            for prefix, w in _WEIGHTS if a.startswith(prefix)]
    if not pool:
        return "look"
    actions, weights = zip(*pool)
    return rng.choices(actions, weights=weights)[0]


def walk_game(path: Path, seed: int, steps: int = 80, errand_every: int = 20) -> Walk:
    """Walk one game with a seeded explorer, recording the engine's truth after every step."""
    try:
        import textworld
    except ImportError as exc:
        raise BrainMemError(f"TextWorld is not installed (pip install textworld): {exc}") from exc
    rng = random.Random(seed)
    env = textworld.start(str(path), request_infos=textworld.EnvInfos(
        facts=True, admissible_commands=True, objective=True))
    try:
        state = env.reset()
        place, status, room, holders = _truth(state.facts)
        walk = Walk(path.name, seed, (state.objective or "").strip(), holders=set(holders))
        intro = clean_feedback(state.feedback)
        walk.steps.append(Step(0, "", intro, True, place, status, room))
        goal, interruption_at, interrupted = "", -1, 0
        for i in range(1, steps + 1):
            step_goal, started, resolved = goal, "", False
            if (i - 1) % errand_every == 0:
                things = sorted(place)
                step_goal = goal = (f"find the {rng.choice(things)} and put it on the "
                                    f"{rng.choice(sorted(holders) or ['floor'])}") if things else ""
                interruption_at = i + rng.randrange(errand_every // 3, errand_every - 4)
            if i == interruption_at:
                started, interrupted = f"the phone rings in the {room}, answer it", 3
            elif interrupted:
                interrupted -= 1
                resolved = interrupted == 0
            room_things = {x for x in place if x in state.feedback.lower()}
            action = _choose(rng, list(state.admissible_commands or []), place, room_things)
            admissible = set(state.admissible_commands or [])
            state, _score, done = env.step(action)
            place, status, room, holders = _truth(state.facts)
            walk.holders |= holders
            walk.steps.append(Step(i, action, clean_feedback(state.feedback),
                                   action in admissible, place, status, room, step_goal,
                                   started, resolved))
            if done:
                break
    finally:
        env.close()
    return walk
