"""Our kitchen: a small text world built to stress exactly what a planner forgets.

Rooms laid out on a grid (random by seed), closed containers whose contents show only once opened,
distractor objects, a needed ingredient moved by someone else mid-episode (the old fact goes stale),
and hidden hazards the task text never mentions: filling the coffee machine while it is switched on
short-circuits it; a tomato put on the bread before the cheese makes the sandwich fall apart. Which
seeds carry a hazardous recipe order is random too. The recipe card in the kitchen is the only place
the steps are written down, and it cannot be carried.

Each task step is a valid action exactly when the world allows it (the ingredients in hand, the tool
held, the fixture in the room, the previous stage done), which is what a robot's action server
would report as executable. Interruptions come from ``Interruptions``, a wrapper shared with
CookingWorld.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from brainmem_ros.kitchen.base import EnvState, EnvironmentError_

__all__ = ["KitchenWorld", "TASKS", "Task", "Step"]

DIRECTIONS = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}

# room -> fixtures: (name, kind) where kind is container (closed at start), surface or appliance
ROOMS = {
    "kitchen": [("fridge", "container"), ("counter", "surface"), ("cutlery drawer", "container"),
                ("cupboard", "container"), ("coffee machine", "appliance"), ("sink", "surface")],
    "pantry": [("shelf", "surface"), ("bread bin", "container"), ("spice rack", "surface")],
    "dining room": [("dining table", "surface"), ("sideboard", "container")],
    "hallway": [("shoe cabinet", "container"), ("side table", "surface")],
    "living room": [("coffee table", "surface"), ("bookcase", "surface"), ("chest", "container")],
    "laundry room": [("work table", "surface"), ("laundry basket", "container"),
                     ("utility sink", "surface")],
}
MASS = {
    "butter", "cheese", "lettuce", "coffee beans", "olive oil", "jam", "milk", "mustard", "ham",
    "salt"
}
DISTRACTORS = [
    "jam", "milk", "mustard", "ham", "red apple", "banana", "sock", "stapler", "remote control",
    "newspaper", "umbrella", "salt", "candle", "teapot", "spoon", "fork"
]


@dataclass(frozen=True)
class Step:
    """One direction of a recipe: the action text, what must be in hand, where it can be done."""

    action: str
    needs: tuple[str, ...] = ()
    tool: str = ""
    at: str = ""  # a fixture that must be in the current room
    stage: int = 0  # steps of a later stage need every step of the earlier stages done
    message: str = ""


@dataclass(frozen=True)
class Task:
    name: str
    text: str
    ingredients: tuple[str, ...]
    steps: tuple[Step, ...]
    homes: dict  # item -> fixtures it may start on or in
    hazard: str = ""  # which hidden hazard this task can carry


def _sandwich() -> Task:
    return Task(
        "sandwich",
        "Make a sandwich and serve it on the dining table. "
        "The recipe card in the kitchen says how.",
        ("bread", "butter", "cheese", "tomato", "lettuce"),
        (Step("slice bread", ("bread", ), "knife", stage=0, message="You slice the bread."),
         Step("spread butter on bread",
              ("butter", "bread"), "knife", stage=1, message="You spread the butter on the bread."),
         Step("put cheese on bread",
              ("cheese", "bread"), stage=2, message="You put the cheese on the bread."),
         Step("put tomato on bread",
              ("tomato", "bread"), stage=2, message="You put the tomato on the bread."),
         Step("put lettuce on bread",
              ("lettuce", "bread"), stage=2, message="You put the lettuce on the bread."),
         Step("serve sandwich on dining table", ("bread", ), at="dining table", stage=3,
              message="You serve the sandwich on the dining table.")), {
                  "bread": ["bread bin", "shelf", "counter"],
                  "butter": ["fridge"],
                  "cheese": ["fridge", "sideboard"],
                  "tomato": ["counter", "shelf", "dining table", "fridge"],
                  "lettuce": ["fridge", "work table", "shelf"],
                  "knife": ["cutlery drawer", "counter", "dining table", "sideboard"]
              }, hazard="layering")


def _coffee() -> Task:
    return Task(
        "coffee_and_counter",
        "Make a cup of coffee, then clean the kitchen counter. The recipe card in the kitchen "
        "says how.", ("mug", "water jug", "coffee beans", "sponge"),
        (Step("put mug under coffee machine",
              ("mug", ), at="coffee machine", message="You put the mug under the coffee machine."),
         Step("fill coffee machine with water", ("water jug", ), at="coffee machine",
              message="You fill the coffee machine with water."),
         Step("put coffee beans in coffee machine", ("coffee beans", ), at="coffee machine",
              message="You put the coffee beans in the coffee machine."),
         Step("switch on coffee machine",
              (), at="coffee machine", message="You switch on the coffee machine."),
         Step("brew coffee",
              (), at="coffee machine", stage=1, message="You brew the coffee. The mug fills up."),
         Step("wipe counter with sponge",
              ("sponge", ), at="counter", stage=2, message="You wipe the counter with the sponge."),
         Step("rinse sponge in sink", ("sponge", ), at="sink", stage=3,
              message="You rinse the sponge in the sink. The counter is clean.")), {
                  "mug": ["cupboard", "sideboard", "dining table", "coffee table"],
                  "water jug": ["counter", "shelf", "utility sink"],
                  "coffee beans": ["cupboard", "shelf", "spice rack"],
                  "sponge": ["utility sink", "work table", "laundry basket"]
              }, hazard="short_circuit")


def _salad() -> Task:
    return Task(
        "salad",
        "Make a salad and serve it on the dining table. The recipe card in the kitchen says how.",
        ("lettuce", "cucumber", "tomato", "olive oil", "bowl"),
        (Step("wash lettuce in sink",
              ("lettuce", ), at="sink", message="You wash the lettuce in the sink."),
         Step("chop cucumber", ("cucumber", ), "knife", message="You chop the cucumber."),
         Step("chop tomato", ("tomato", ), "knife", message="You chop the tomato."),
         Step("put lettuce in bowl",
              ("lettuce", "bowl"), stage=1, message="You put the lettuce in the bowl."),
         Step("put cucumber in bowl",
              ("cucumber", "bowl"), stage=1, message="You put the cucumber in the bowl."),
         Step("put tomato in bowl",
              ("tomato", "bowl"), stage=1, message="You put the tomato in the bowl."),
         Step("pour olive oil on salad",
              ("olive oil", "bowl"), stage=2, message="You pour the olive oil on the salad."),
         Step("serve salad on dining table", ("bowl", ), at="dining table", stage=3,
              message="You serve the salad on the dining table.")), {
                  "lettuce": ["fridge", "work table"],
                  "cucumber": ["fridge", "shelf", "counter"],
                  "tomato": ["counter", "shelf", "fridge", "dining table"],
                  "olive oil": ["spice rack", "cupboard", "shelf"],
                  "bowl": ["cupboard", "sideboard", "chest"],
                  "knife": ["cutlery drawer", "counter", "sideboard"]
              })


TASKS = {t.name: t for t in (_sandwich(), _coffee(), _salad())}


@dataclass
class _Fixture:
    name: str
    kind: str
    room: str
    open: bool = False
    on: bool = False
    items: list[str] = field(default_factory=list)


def _a(item: str) -> str:
    if item in MASS:
        return f"some {item}"
    return f"an {item}" if item[0] in "aeiou" else f"a {item}"


def _listing(items: list[str]) -> str:
    named = [_a(i) for i in items]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


class KitchenWorld:
    """Seeded text kitchen.

    ``reset(seed)`` lays out rooms, picks the task (``tasks`` cycle by seed), the recipe order
    (hazardous with probability ``hazard_rate``), the distractors and the step at which someone
    moves an ingredient (probability ``move_rate``).
    """

    name = "kitchen"

    def __init__(self, tasks: tuple[str, ...] = ("sandwich", "coffee_and_counter", "salad"),
                 rooms: int = 6, distractors: int = 6, hazard_rate: float = 0.1,
                 move_rate: float = 0.7):
        unknown = [t for t in tasks if t not in TASKS]
        if unknown or not tasks:
            raise EnvironmentError_(f"unknown kitchen task(s) {unknown}; known: {', '.join(TASKS)}")
        if not 3 <= rooms <= len(ROOMS):
            raise EnvironmentError_(f"rooms must be between 3 and {len(ROOMS)}, got {rooms}")
        self.tasks, self.n_rooms, self.n_distractors = tuple(tasks), rooms, distractors
        if not (0.0 <= hazard_rate <= 1.0 and 0.0 <= move_rate <= 1.0) or distractors < 0:
            raise EnvironmentError_(
                "hazard_rate and move_rate must lie in [0, 1], distractors must be >= 0")
        self.hazard_rate, self.move_rate = hazard_rate, move_rate
        self.task: Optional[Task] = None

    @classmethod
    def from_params(cls, text: str) -> "KitchenWorld":
        """``"hazard_rate=1.0,rooms=5,tasks=sandwich+salad"`` (the ``--game-params`` syntax)."""
        kinds = {
            "rooms": int,
            "distractors": int,
            "hazard_rate": float,
            "move_rate": float,
            "tasks": lambda v: tuple(v.split("+"))
        }
        options = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, _, value = part.partition("=")
            if key not in kinds or not value:
                raise EnvironmentError_(
                    f"unknown or empty kitchen game parameter {part!r}; known: {', '.join(kinds)}")
            try:
                options[key] = kinds[key](value)
            except ValueError as exc:
                raise EnvironmentError_(f"bad value in {part!r}: {exc}") from exc
        return cls(**options)

    # -- episode set-up ----------------------------------------------------------------------
    def reset(self, seed: int) -> EnvState:
        rng = random.Random(seed)
        self.rng = rng
        self.task = TASKS[self.tasks[seed % len(self.tasks)]]
        self._layout(rng)
        self.fixtures: dict[str, _Fixture] = {}
        for room in self.rooms:
            for name, kind in ROOMS[room]:
                self.fixtures[name] = _Fixture(name, kind, room)
        self.held: list[str] = []
        self.done: list[str] = []
        self.finished = self.failed = False
        self.failure = ""
        self.steps_taken = 0
        self.order = list(self.task.steps)
        self.hazardous = rng.random() < self.hazard_rate
        self._order_recipe(rng)
        needed = list(self.task.ingredients) + sorted({s.tool for s in self.task.steps if s.tool})
        for item in needed:
            homes = [f for f in self.task.homes.get(item, []) if f in self.fixtures] or \
                    [f.name for f in self.fixtures.values() if f.kind != "appliance"]
            self.fixtures[rng.choice(homes)].items.append(item)
        spare = [f.name for f in self.fixtures.values() if f.kind != "appliance"]
        for item in rng.sample([d for d in DISTRACTORS if d not in needed], self.n_distractors):
            self.fixtures[rng.choice(spare)].items.append(item)
        self.move_at = rng.randint(8, 25) if rng.random() < self.move_rate else -1
        self.moved = ""
        self.room = rng.choice([r for r in self.rooms if r != "kitchen"])
        return self._state(self._describe())

    def _layout(self, rng: random.Random) -> None:
        names = ["kitchen"] + rng.sample([r for r in ROOMS if r != "kitchen"], self.n_rooms - 1)
        cells = {(0, 0): names[0]}
        self.exits: dict[str, dict[str, str]] = {n: {} for n in names}
        for name in names[1:]:
            while True:
                (x, y), _ = rng.choice(sorted(cells.items()))
                d = rng.choice(sorted(DIRECTIONS))
                cell = (x + DIRECTIONS[d][0], y + DIRECTIONS[d][1])
                if cell not in cells:
                    cells[cell] = name
                    self.exits[cells[(x, y)]][d] = name
                    self.exits[name][OPPOSITE[d]] = cells[(x, y)]
                    break
        self.rooms = names

    def _order_recipe(self, rng: random.Random) -> None:
        steps = list(self.task.steps)
        if self.task.hazard == "layering":
            layers = [s for s in steps if s.stage == 2]
            rng.shuffle(layers)
            names = [s.action for s in layers]
            tomato_first = names.index("put tomato on bread") < names.index("put cheese on bread")
            if tomato_first != self.hazardous:
                i, j = names.index("put tomato on bread"), names.index("put cheese on bread")
                layers[i], layers[j] = layers[j], layers[i]
            steps = [s for s in steps if s.stage < 2] + layers + [s for s in steps if s.stage > 2]
        elif self.task.hazard == "short_circuit":
            first = [s for s in steps if s.stage == 0 and s.action != "switch on coffee machine"]
            rng.shuffle(first)
            on = next(s for s in steps if s.action == "switch on coffee machine")
            fill = [s.action for s in first].index("fill coffee machine with water")
            first.insert(rng.randint(0, fill) if self.hazardous else len(first), on)
            steps = first + [s for s in steps if s.stage > 0]
        else:
            first = [s for s in steps if s.stage == 0]
            rng.shuffle(first)
            steps = first + [s for s in steps if s.stage > 0]
        self.order = steps

    # -- text --------------------------------------------------------------------------------
    def _fixture_text(self, f: _Fixture) -> str:
        if f.kind == "container":
            if not f.open:
                return f"a {f.name} that is closed"
            if f.items:
                return f"a {f.name} that contains {_listing(f.items)}"
            return f"a {f.name} that is empty"
        if f.kind == "appliance":
            return f"a {f.name} that is {'on' if f.on else 'off'}"
        if f.items:
            return f"a {f.name} that has {_listing(f.items)} on it"
        return f"a {f.name} that has nothing on it"

    def _describe(self) -> str:
        parts = [self._fixture_text(f) for f in self.fixtures.values() if f.room == self.room]
        if self.room == "kitchen":
            parts.append("a recipe card pinned to the wall")
        text = f"You are in the {self.room}. You see " + ", ".join(
            parts[:-1]) + f", and {parts[-1]}. "
        text += " ".join(f"To the {d.capitalize()} you see the {r}."
                         for d, r in sorted(self.exits[self.room].items()))
        return text

    def _recipe(self) -> str:
        lines = ["Recipe card.", "", "Ingredients:"] + [f"  {i}" for i in self.task.ingredients]
        lines += ["", "Directions:"] + [f"  {s.action}" for s in self.order]
        return "\n".join(lines)

    # -- the rules ---------------------------------------------------------------------------
    def _here(self) -> list[_Fixture]:
        return [f for f in self.fixtures.values() if f.room == self.room]

    def _visible_items(self) -> list[tuple[str, _Fixture]]:
        return [(i, f) for f in self._here() if f.kind != "container" or f.open for i in f.items]

    def _step_ready(self, step: Step) -> bool:
        if step.action in self.done:
            return False
        if any(n not in self.held
               for n in step.needs) or (step.tool and step.tool not in self.held):
            return False
        if step.at and step.at not in [f.name for f in self._here()]:
            return False
        earlier = [s.action for s in self.task.steps if s.stage < step.stage]
        return all(a in self.done for a in earlier)

    def valid_actions(self) -> list[str]:
        if self.finished or self.failed:
            return []
        actions = [f"move {d}"
                   for d in sorted(self.exits[self.room])] + ["look around", "inventory"]
        for f in self._here():
            if f.kind == "container":
                actions.append(f"{'close' if f.open else 'open'} {f.name}")
        actions += [f"take {i}" for i, _ in self._visible_items()]
        for item in self.held:
            actions += [
                f"put {item} {'in' if f.kind == 'container' else 'on'} {f.name}"
                for f in self._here() if f.kind != "appliance" and (f.kind != "container" or f.open)
            ]
        if self.room == "kitchen":
            actions.append("read recipe card")
        actions += [s.action for s in self.task.steps if self._step_ready(s)]
        return sorted(set(actions))

    def step(self, action: str) -> EnvState:
        if self.task is None:
            raise EnvironmentError_("reset the kitchen before stepping it")
        action = " ".join(action.lower().split())
        if self.finished or self.failed:
            return self._state("The episode is over.")
        self.steps_taken += 1
        self._maybe_move_something()
        if action not in self.valid_actions():
            return self._state("You can't do that here.")
        verb, _, rest = action.partition(" ")
        if verb == "move":
            self.room = self.exits[self.room][rest]
            return self._state(self._describe())
        if action == "look around":
            return self._state(self._describe())
        if action == "inventory":
            return self._state("You are carrying " +
                               (_listing(self.held) if self.held else "nothing") + ".")
        if action == "read recipe card":
            return self._state(self._recipe())
        if verb in ("open", "close"):
            f = self.fixtures[rest]
            f.open = verb == "open"
            if not f.open:
                return self._state(f"You close the {f.name}.")
            inside = f"The {f.name} contains {_listing(f.items)}." if f.items else "It is empty."
            return self._state(f"You open the {f.name}. {inside}")
        if verb == "take":
            for item, f in self._visible_items():
                if item == rest:
                    f.items.remove(item)
                    self.held.append(item)
                    return self._state(f"You take the {item} from the {f.name}.")
        if verb == "put" and not any(s.action == action for s in self.task.steps):
            for f in self._here():
                for prep in ("in", "on"):
                    for item in list(self.held):
                        if action == f"put {item} {prep} {f.name}":
                            self.held.remove(item)
                            f.items.append(item)
                            return self._state(f"You put the {item} {prep} the {f.name}.")
        step = next(s for s in self.task.steps if s.action == action)
        return self._do(step)

    def _do(self, step: Step) -> EnvState:
        hazard = self._hazard(step)
        if hazard:
            self.failed, self.failure = True, hazard[0]
            return self._state(hazard[1])
        self.done.append(step.action)
        if step.action == "switch on coffee machine":
            self.fixtures["coffee machine"].on = True
        if all(s.action in self.done for s in self.task.steps):
            self.finished = True
            return self._state(step.message + " Task complete!")
        return self._state(step.message)

    def _hazard(self, step: Step) -> Optional[tuple[str, str]]:
        if step.action == "fill coffee machine with water" and self.fixtures["coffee machine"].on:
            return (
                "short_circuit",
                "You fill the coffee machine with water while it is switched on. Water runs into "
                "the live parts and the coffee machine short-circuits! The task has failed.")
        if step.action == "put tomato on bread" and "put cheese on bread" not in self.done:
            return (
                "layering",
                "You put the tomato on the bread before the cheese. The wet tomato slides on the "
                "butter and the sandwich falls apart! The task has failed.")
        return None

    def _maybe_move_something(self) -> None:
        """Someone else tidies up: a needed ingredient not yet in hand moves to another room."""
        if self.steps_taken != self.move_at:
            return
        candidates = [(i, f) for f in self.fixtures.values() for i in f.items
                      if i in self.task.ingredients and f.room != self.room]
        if not candidates:
            return
        item, source = self.rng.choice(sorted(candidates, key=lambda c: (c[0], c[1].name)))
        targets = [
            f for f in self.fixtures.values()
            if f.kind == "surface" and f.room not in (source.room, self.room)
        ]
        if not targets:
            return
        target = self.rng.choice(targets)
        source.items.remove(item)
        target.items.append(item)
        self.moved = f"{item}: {source.name} -> {target.name}"

    def _state(self, observation: str) -> EnvState:
        return EnvState(
            self.task.text, observation, self.valid_actions(), done=self.finished or self.failed,
            success=self.finished, failed=self.failed, info={
                "task_name": self.task.name,
                "hazardous": self.hazardous,
                "failure": self.failure,
                "moved": self.moved,
                "location": self.room
            })

    def close(self) -> None:
        pass
