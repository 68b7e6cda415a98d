"""kitchen_sim_node: our kitchen (or CookingWorld) as a ROS node: actions in, observations out.

Serves ``/kitchen/step`` (EnvStep; ``reset`` starts episode ``seed``) and publishes every
observation on ``/kitchen/observation`` for anyone watching. One episode per agent id, so several
planners can share one node. The planner sees exactly what the in-process evaluation shows it.
"""
from __future__ import annotations

import sys
import threading

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes import names
from brainmem_ros.core.errors import BrainMemError
from brainmem_ros.kitchen import Interruptions, make_environment
from brainmem_ros.msg import Observation
from brainmem_ros.nodes.parameters import declare, guard_parameters
from brainmem_ros.nodes.runtime import run
from brainmem_ros.srv import EnvStep

__all__ = ["KitchenSimNode", "main"]


class KitchenSimNode(Node):

    def __init__(self, **kwargs):
        super().__init__("kitchen_sim_node", **kwargs)
        self.env_name = declare(self, "env", "kitchen", "environment: kitchen or cookingworld")
        self.fold = declare(self, "fold", "dev", "CookingWorld fold: train, dev or test")
        self.game_params = declare(self, "game_params", "",
                                   "environment parameters (the --game-params syntax)")
        self.interruptions = declare(self, "interruptions", False,
                                     "a timer rings in another room at a random step")
        depth = declare(self, "qos_depth", 100, "observation topic queue depth", 1, 100000)
        if self.env_name not in ("kitchen", "cookingworld"):
            raise BrainMemError(f"env must be kitchen or cookingworld, got {self.env_name!r}")
        self._make()  # fail at start, not at the first request, when the environment cannot run
        self.episodes: dict[str, object] = {}
        self._lock = threading.Lock()
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.observations = self.create_publisher(Observation, names.KITCHEN_OBSERVATION, qos)
        self.create_service(EnvStep, names.KITCHEN_STEP, self.on_step)
        guard_parameters(self)

    def _make(self):
        options = {"game_params": self.game_params}
        if self.env_name == "cookingworld":
            options["fold"] = self.fold
            if not self.game_params:
                options.pop("game_params")
        env = make_environment(self.env_name, **options)
        return Interruptions(env) if self.interruptions else env

    def on_step(self, request: EnvStep.Request, response: EnvStep.Response) -> EnvStep.Response:
        agent = request.agent_id or "robot"
        try:
            with self._lock:
                env = self.episodes.get(agent)
                if request.reset:
                    if env is None:
                        env = self.episodes[agent] = self._make()
                    state = env.reset(int(request.seed))
                elif env is None:
                    raise BrainMemError(
                        f"agent {agent!r} has no episode; reset first (reset: true)")
                elif not request.action.strip():
                    raise BrainMemError("empty action; to start an episode set reset: true")
                else:
                    state = env.step(request.action[:500])
        except (BrainMemError, ValueError) as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success = True
        response.task, response.observation = state.task, state.observation
        response.valid_actions = list(state.valid_actions)
        response.done = state.done
        response.task_success, response.task_failed = state.success, state.failed
        response.location = str(state.info.get("location", ""))
        response.failure = str(state.info.get("failure", "")) if state.failed else ""
        response.interrupted = bool(state.info.get("interrupted", False))
        response.interruption_handled = bool(state.info.get("timer_handled", False))
        self.observations.publish(
            Observation(agent_id=agent, text=state.observation[:4000], source="kitchen_sim",
                        confidence=1.0))
        return response

    def close(self) -> None:
        for env in self.episodes.values():
            env.close()


def main(args=None) -> int:
    return run([KitchenSimNode], args)


if __name__ == "__main__":
    sys.exit(main())
