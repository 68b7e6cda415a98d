"""A test-only environment behind the EnvStep service: "fetch the milk" in two steps.

It exists to drive planner_node over DDS in tests; the kitchen simulator of the evaluation work
replaces it.
"""
import sys
from pathlib import Path

from rclpy.node import Node

from brainmem_ros.nodes import names
from brainmem_ros.srv import EnvStep

STATES = {
    "start": ("You are in the kitchen. The fridge is closed.", ["open fridge", "look"]),
    "open": ("You open the fridge. The milk is in the fridge.",
             ["take milk from fridge", "close fridge"]),
    "done": ("You take the milk from the fridge. Task complete.", []),
}
MOVES = {("start", "open fridge"): "open", ("open", "take milk from fridge"): "done"}


class TinyEnvironment(Node):

    def __init__(self):
        super().__init__("tiny_environment")
        self.state = "start"
        self.create_service(EnvStep, names.KITCHEN_STEP, self.on_step)

    def on_step(self, request, response):
        if request.reset:
            self.state = "start"
        elif (self.state, request.action) in MOVES:
            self.state = MOVES[(self.state, request.action)]
        elif request.action not in STATES[self.state][1]:
            response.success, response.message = False, f"not a valid action now: {request.action}"
            return response
        response.success = True
        response.task = "fetch the milk"
        response.observation, actions = STATES[self.state]
        response.valid_actions = actions
        response.done = response.task_success = self.state == "done"
        return response


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from processes import serve_node

    serve_node(TinyEnvironment)
