"""Interruptions for any environment: a timer rings in another room at a random step.

The ringing timer is a temporary goal: go to that room and switch it off (within ``patience``
steps, or the episode fails), then resume the main task. The wrapper reads only the text the agent
also reads ("You are in the X", "To the North you see the Y"), so it wraps CookingWorld exactly as
it wraps our kitchen.
"""
from __future__ import annotations

import random
import re

from brainmem_ros.kitchen.base import EnvState, Environment

__all__ = ["Interruptions", "SWITCH_OFF"]

SWITCH_OFF = "switch off timer"
_HERE = re.compile(r"you are in the ([a-z][a-z ]*?)\.", re.I)
_EXIT = re.compile(r"to the (?:north|south|east|west) you see the ([a-z][a-z ]*?)\.", re.I)


class Interruptions:
    """Wrap ``env``; the ring comes between steps ``earliest`` and ``latest`` (inclusive)."""

    def __init__(self, env: Environment, earliest: int = 6, latest: int = 20, patience: int = 25):
        self.env, self.earliest, self.latest, self.patience = env, earliest, latest, patience
        self.name = env.name

    def reset(self, seed: int) -> EnvState:
        self.rng = random.Random(seed * 7919 + 17)
        self.ring_at = self.rng.randint(self.earliest, self.latest)
        self.steps = 0
        self.room = self.timer_room = ""
        self.rooms: list[str] = []
        self.rang_at = -1
        self.handled = False
        self.over = False
        return self._wrap(self.env.reset(seed), "")

    def _track(self, text: str) -> None:
        here = _HERE.findall(text)
        if here:
            self.room = here[-1].lower()
        for room in here + _EXIT.findall(text):
            if room.lower() not in self.rooms:
                self.rooms.append(room.lower())

    def _pending(self) -> bool:
        return self.rang_at >= 0 and not self.handled

    def step(self, action: str) -> EnvState:
        if self.over:
            return EnvState(self.last.task, "The episode is over.", [], True, self.last.success,
                            self.last.failed, dict(self.last.info))
        self.steps += 1
        if action.strip().lower() == SWITCH_OFF and self._pending(
        ) and self.room == self.timer_room:
            self.handled = True
            state = EnvState(self.last.task, "You switch off the timer. The ringing stops.",
                             [a for a in self.last.valid_actions if a != SWITCH_OFF],
                             info=dict(self.last.info))
            return self._wrap(state, "", tracked=True)
        return self._wrap(self.env.step(action), action)

    def _wrap(self, state: EnvState, action: str, tracked: bool = False) -> EnvState:
        if not tracked:
            self._track(state.observation)
        note = ""
        if self.rang_at < 0 and self.steps >= self.ring_at and not state.done:
            others = [r for r in self.rooms if r != self.room]
            if others:
                self.timer_room = self.rng.choice(others)
                self.rang_at = self.steps
                note = (f"\nA timer rings in the {self.timer_room}! "
                        "Switch off the timer, then carry on.")
        elif self._pending() and not state.done:
            if self.steps - self.rang_at >= self.patience:
                state = EnvState(
                    state.task, state.observation + "\nThe timer has been ringing for too long: "
                    "the pot on the stove boils over. The task has failed.", [], True, False, True,
                    dict(state.info, failure="timer_ignored"))
            elif self.steps - self.rang_at in (8, 16):
                note = f"\nThe timer is still ringing in the {self.timer_room}."
        valid = list(state.valid_actions)
        if self._pending() and self.room == self.timer_room and not state.done:
            valid.append(SWITCH_OFF)
        info = dict(state.info, interrupted=self.rang_at >= 0, timer_handled=self.handled)
        self.last = EnvState(state.task, state.observation + note, sorted(set(valid)), state.done,
                             state.success, state.failed, info)
        self.over = state.done
        return self.last

    def close(self) -> None:
        self.env.close()
