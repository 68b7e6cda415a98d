"""The kitchen evaluation: the same episodes under three memory conditions, and their metrics.

``episode.run_episode`` is the one step loop (in-process here, and in planner_node over ROS);
``metrics`` defines every reported figure on plain episode records; ``runner.evaluate`` runs the
conditions and writes the JSON report; ``plot`` draws it.
"""
