"""TextWorldExpress CookingWorld behind our ``Environment`` interface (a kitchen nobody here wrote).

Needs ``textworld-express`` and Java 17. Seeds index into the fold's list of valid seeds, so
``--seeds 0-29 --fold dev`` means the first thirty dev games. The test fold is for acceptance only.
"""
from __future__ import annotations

import re

from brainmem_ros.kitchen.base import EnvState, EnvironmentError_

__all__ = ["CookingWorld", "DEFAULT_GAME_PARAMS", "ENGINE_DEFAULTS"]

# The engine's own defaults: eleven rooms, closed doors between them, a limited inventory.
ENGINE_DEFAULTS = {"numLocations": 11, "numIngredients": 3, "numDistractorItems": 10,
                   "includeDoors": 1, "limitInventorySize": 1}
DEFAULT_GAME_PARAMS = ",".join(f"{k}={v}" for k, v in ENGINE_DEFAULTS.items())
FOLDS = ("train", "dev", "test")


class CookingWorld:
    name = "cookingworld"

    def __init__(self, fold: str = "dev", game_params: str = DEFAULT_GAME_PARAMS,
                 step_limit: int = 1000):
        if fold not in FOLDS:
            raise EnvironmentError_(f"fold must be one of {', '.join(FOLDS)}, got {fold!r}")
        try:
            from textworld_express import TextWorldExpressEnv
        except ImportError as exc:
            raise EnvironmentError_(
                f"CookingWorld needs textworld-express (pip install textworld-express): {exc}"
            ) from exc
        try:
            self.env = TextWorldExpressEnv(envStepLimit=step_limit)
            self.env.load(gameName="cookingworld", gameParams=game_params)
        except Exception as exc:  # the Java side reports everything as py4j errors
            raise EnvironmentError_(
                f"TextWorldExpress did not start (is Java 17 installed?): {exc}") from exc
        self.fold, self.game_params = fold, game_params
        getter = {
            "train": self.env.getValidSeedsTrain,
            "dev": self.env.getValidSeedsDev,
            "test": self.env.getValidSeedsTest
        }[fold]
        self.seeds = list(getter())
        self.task = ""

    def reset(self, seed: int) -> EnvState:
        if not 0 <= seed < len(self.seeds):
            raise EnvironmentError_(
                f"seed {seed} outside the {self.fold} fold's {len(self.seeds)} games")
        obs, infos = self.env.reset(seed=self.seeds[seed], gameFold=self.fold,
                                    generateGoldPath=False)
        self.task = infos["taskDescription"]
        return self._state(obs, infos, "")

    def gold_path(self, seed: int) -> list[str]:
        """Return the engine's own solution of a game: how long a game is, independent of us."""
        if not 0 <= seed < len(self.seeds):
            raise EnvironmentError_(
                f"seed {seed} outside the {self.fold} fold's {len(self.seeds)} games")
        self.env.reset(seed=self.seeds[seed], gameFold=self.fold, generateGoldPath=True)
        self.task = ""
        return list(self.env.getGoldActionSequence())

    def step(self, action: str) -> EnvState:
        if not self.task:
            raise EnvironmentError_("reset CookingWorld before stepping it")
        obs, _reward, _done, infos = self.env.step(action)
        return self._state(obs, infos, action)

    def _state(self, obs: str, infos: dict, action: str) -> EnvState:
        success, failed = bool(infos.get("tasksuccess")), bool(infos.get("taskfailure"))
        return EnvState(self.task, obs.strip(), sorted(infos.get("validActions", [])), success
                        or failed, success, failed, {
                            "failure": action if failed else "",
                            "score": infos.get("score", 0.0),
                            "location": _where(infos.get("look", ""))
                        })

    def close(self) -> None:
        try:
            self.env.close()
        except Exception:
            pass


def _where(look: str) -> str:
    """Return the room the engine's own look says the player is in (where it acts)."""
    m = re.search(r"You are in the ([^.]+)\.", look or "")
    return m.group(1).strip().lower() if m else ""
