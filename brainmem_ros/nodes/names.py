"""Every topic and service name of brainmem_ros, in one place.

The names are relative: they resolve in the node's namespace. Without one they are
``/retrieve_memory``, ``/brainmem/...``; with namespace ``robot1`` every topic and service of the
stack lives under ``/robot1``, so two robots' stacks run side by side on one domain. Nodes, tools
and tests take their names from here; remap any of them at run time with the usual
``--ros-args -r retrieve_memory:=...``.

One name is absolute on purpose: ``/diagnostics``, where every node of a robot reports its health
and where a diagnostic aggregator or rqt_robot_monitor listens (nav2 and diagnostic_updater do the
same); each status names its node with its namespace.
"""

__all__ = [
    "RETRIEVE_MEMORY", "STORE_MEMORY", "INGEST_TRACES", "CONSOLIDATE", "FORGET", "UPDATE_GOAL",
    "GET_WORKING_MEMORY", "REPORT_OUTCOME", "OBSERVATION", "ACTION_RESULT", "GOAL_EVENT",
    "KITCHEN_STEP", "KITCHEN_OBSERVATION", "MARKERS", "DIAGNOSTICS", "CAPTION", "POSE", "ODOM",
    "SERVICES", "TOPICS"
]

# Services of store_node.
RETRIEVE_MEMORY = "retrieve_memory"
STORE_MEMORY = "brainmem/store_memory"
INGEST_TRACES = "brainmem/ingest_traces"
CONSOLIDATE = "brainmem/consolidate"
FORGET = "brainmem/forget"
UPDATE_GOAL = "brainmem/update_goal"
GET_WORKING_MEMORY = "brainmem/get_working_memory"
REPORT_OUTCOME = "brainmem/report_outcome"
# Topics: what the robot perceives and does (into encoder_node), goal events (store_node out).
OBSERVATION = "brainmem/observation"
ACTION_RESULT = "brainmem/action_result"
GOAL_EVENT = "brainmem/goal_event"
# What the robot remembers on the map (store_node out, latched), and every node's health.
MARKERS = "brainmem/markers"
DIAGNOSTICS = "/diagnostics"
# caption_node's inputs by default (each is a parameter): captions and the robot's pose.
CAPTION = "caption"
POSE = "pose"
ODOM = "odom"
# The kitchen simulator (kitchen_sim_node), an environment planner_node acts in.
KITCHEN_STEP = "kitchen/step"
KITCHEN_OBSERVATION = "kitchen/observation"

SERVICES = (RETRIEVE_MEMORY, STORE_MEMORY, INGEST_TRACES, CONSOLIDATE, FORGET, UPDATE_GOAL,
            GET_WORKING_MEMORY, REPORT_OUTCOME)
TOPICS = (OBSERVATION, ACTION_RESULT, GOAL_EVENT, MARKERS)
