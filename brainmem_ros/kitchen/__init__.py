"""Text environments the planners are evaluated on: ours, CookingWorld and TextWorld's kitchens.

Our kitchen, TextWorldExpress CookingWorld and Microsoft TextWorld's cooking games all speak the
same small interface (``Environment``): a task text, an observation text, the valid
actions, and done / success / failure. Nothing else crosses to the planner.
"""
from brainmem_ros.kitchen.base import Environment, EnvState, EnvironmentError_
from brainmem_ros.kitchen.interruption import Interruptions
from brainmem_ros.kitchen.world import KitchenWorld, TASKS

__all__ = [
    "Environment", "EnvState", "EnvironmentError_", "Interruptions", "KitchenWorld", "TASKS",
    "make_environment"
]


def make_environment(name: str, **options) -> Environment:
    """Make an environment by name: ``kitchen``, ``cookingworld`` or ``textworld``.

    Options are the environment's own (fold, game_params, tasks...).
    """
    if name == "kitchen":
        params = options.pop("game_params", "")
        options.pop("fold", None)  # the kitchen has no folds: seeds are the episodes
        return KitchenWorld.from_params(params) if params else KitchenWorld(**options)
    if name == "cookingworld":
        from brainmem_ros.kitchen.cookingworld import CookingWorld

        return CookingWorld(**options)
    if name == "textworld":
        from brainmem_ros.kitchen.textworld_cooking import TextWorldCooking

        options.pop("fold", None)  # games are made from seeds: there are no folds
        return TextWorldCooking(**options)
    raise EnvironmentError_(
        f"unknown environment {name!r}; one of kitchen, cookingworld, textworld")
