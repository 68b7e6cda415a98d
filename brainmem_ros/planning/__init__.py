"""Decision backends for planner_node: one interface, several planners behind it."""
