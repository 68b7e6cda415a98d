"""Microsoft TextWorld's cooking games behind our ``Environment`` interface.

The First TextWorld Problems kitchens, made by TextWorld's own generator from a seed and tw-make's
options (``--game-params "recipe=3,take=2,go=6,open=1,cook=1,cut=1,drop=0"``), cached on disk. The
planner sees the game's texts, its admissible commands, and whether it was won or lost; never the
facts or the walkthrough.
"""
from __future__ import annotations

from brainmem_ros.evaluation.textworld_walk import clean_feedback, player_room
from brainmem_ros.kitchen.base import EnvState, EnvironmentError_

__all__ = ["TextWorldCooking", "DEFAULT_TW_PARAMS", "parse_tw_params"]

DEFAULT_TW_PARAMS = "recipe=3,take=2,go=6,open=1,cook=1,cut=1,drop=0"


def parse_tw_params(text: str) -> dict:
    from brainmem_ros.evaluation.textworld_walk import TW_OPTIONS

    options = {}
    for part in filter(None, (p.strip() for p in (text or DEFAULT_TW_PARAMS).split(","))):
        name, _, value = part.partition("=")
        if name.strip() not in TW_OPTIONS or not value.strip().isdigit():
            raise EnvironmentError_(
                f"TextWorld game parameters are name=integer with names {', '.join(TW_OPTIONS)}; "
                f"got {part!r}")
        options[name.strip()] = int(value)
    return options


class TextWorldCooking:
    name = "textworld"

    def __init__(self, game_params: str = DEFAULT_TW_PARAMS, step_limit: int = 1000):
        try:
            import textworld
        except ImportError as exc:
            raise EnvironmentError_(
                f"TextWorld cooking games need textworld (pip install textworld): {exc}") from exc
        self._textworld = textworld
        self.options = parse_tw_params(game_params)
        self.step_limit = step_limit
        self.env = None
        self.task = ""

    def _game(self, seed: int):
        from brainmem_ros.core.errors import BrainMemError
        from brainmem_ros.evaluation.textworld_walk import make_game

        if seed < 0:
            raise EnvironmentError_(f"seed must be >= 0, got {seed}")
        try:
            return make_game(seed, self.options)
        except BrainMemError as exc:
            raise EnvironmentError_(str(exc)) from exc

    def gold_path(self, seed: int) -> list[str]:
        """Return the walkthrough the generator wrote (sizes the budget; never used to plan)."""
        infos = self._textworld.EnvInfos(extras=["walkthrough"])
        env = self._textworld.start(str(self._game(seed)), request_infos=infos)
        try:
            return list(env.reset().get("extra.walkthrough") or [])
        finally:
            env.close()

    def reset(self, seed: int) -> EnvState:
        self.close()
        infos = self._textworld.EnvInfos(admissible_commands=True, objective=True, won=True,
                                         lost=True, facts=True)
        self.env = self._textworld.start(str(self._game(seed)), request_infos=infos)
        state = self.env.reset()
        self.task = (state.objective or "").strip()
        observation = clean_feedback(state.feedback, paragraphs=True)
        if self.task and observation.startswith(self.task):
            observation = observation[len(self.task):].strip()
        return self._state(state, observation, False, "")

    def step(self, action: str) -> EnvState:
        if self.env is None:
            raise EnvironmentError_("reset the TextWorld game before stepping it")
        state, _score, done = self.env.step(action)
        return self._state(state, clean_feedback(state.feedback, paragraphs=True), done, action)

    def _state(self, state, observation: str, done: bool, action: str) -> EnvState:
        won, lost = bool(state.won), bool(state.lost)
        return EnvState(self.task, observation, sorted(state.admissible_commands or []),
                        done or won or lost, won, lost,
                        {"failure": action if lost else "", "score": state.score,
                         "location": player_room(state.facts or ()).lower()})

    def close(self) -> None:
        if self.env is not None:
            try:
                self.env.close()
            finally:
                self.env = None
