"""Start the brainmem_ros memory nodes: store_node, encoder_node, consolidation_node.

    ros2 launch brainmem_ros memory.launch.py [config:=FILE] [store:=PATH] [namespace:=NS]
                                              [log_level:=info]
                                              [demo:=true]

With ``demo:=true`` the kitchen (kitchen_sim_node) and a scripted planner_node join them and play a
few interrupted kitchen episodes (what ``brainmem-ros bringup --demo`` does in one process).

Every node reads the same parameter file (config/memory.yaml by default). Without ``ros2 launch``,
``brainmem-ros bringup`` starts the same nodes from the same file in one process, and
``brainmem-ros bringup --processes`` one process per node, as here.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

NODES = ("store_node", "encoder_node", "consolidation_node")


def _nodes(context):
    config = LaunchConfiguration("config").perform(context)
    store = LaunchConfiguration("store").perform(context)
    overrides = {"store.path": os.path.abspath(os.path.expanduser(store))} if store else {}
    nodes = [
        Node(package="brainmem_ros", executable=name, name=name,
             namespace=LaunchConfiguration("namespace"), output="screen",
             parameters=[config, overrides] if overrides else [config],
             arguments=["--ros-args", "--log-level",
                        LaunchConfiguration("log_level")]) for name in NODES
    ]
    if LaunchConfiguration("demo").perform(context).lower() in ("true", "1", "yes"):
        nodes += [
            Node(package="brainmem_ros", executable="kitchen_sim_node", name="kitchen_sim_node",
                 namespace=LaunchConfiguration("namespace"), output="screen", parameters=[{
                     "interruptions": True
                 }]),
            Node(package="brainmem_ros", executable="planner_node", name="planner_node",
                 namespace=LaunchConfiguration("namespace"), output="screen", parameters=[{
                     "backend": "scripted",
                     "condition": "brainmem",
                     "seeds": "0-2"
                 }]),
        ]
    return nodes


def generate_launch_description():
    share = get_package_share_directory("brainmem_ros")
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value=os.path.join(share, "config", "memory.yaml"),
                              description="parameter file read by every memory node"),
        DeclareLaunchArgument(
            "store", default_value="",
            description="SQLite file of long-term memory (empty: store.path from the config)"),
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace for the memory nodes"),
        DeclareLaunchArgument("log_level", default_value="info", description="ROS log level"),
        DeclareLaunchArgument(
            "demo", default_value="false",
            description="also start kitchen_sim_node and a scripted planner_node (kitchen episodes)"
        ),
        OpaqueFunction(function=_nodes),
    ])
