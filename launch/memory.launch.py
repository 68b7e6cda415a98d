"""Start the brainmem_ros memory nodes: store_node, encoder_node, consolidation_node.

    ros2 launch brainmem_ros memory.launch.py [config:=FILE] [store:=PATH] [namespace:=NS]
                                              [use_sim_time:=true] [log_level:=info] [demo:=true]
                                              [captions:=true] [fleet:=DSN]

``namespace`` puts every topic and service of the stack under it (``/NS/retrieve_memory``,
``/NS/brainmem/...``), so several robots' stacks share one domain. ``use_sim_time`` makes every node
take its time from ``/clock`` (a simulator, or ``ros2 bag play --clock``). With ``demo:=true`` the
kitchen (kitchen_sim_node) and a scripted planner_node join them and play a few interrupted kitchen
episodes. With ``captions:=true`` caption_node turns captions (``std_msgs/String`` on ``caption``)
placed at the robot's pose (``pose`` or ``odom``) into observations.

store_node is a managed (lifecycle) node that activates itself (``autostart``); drive it with
``ros2 lifecycle`` when ``autostart`` is false. The memory nodes report on ``/diagnostics`` and
store_node draws what is remembered on ``brainmem/markers``.

The nodes and their own parameters come from ``brainmem_ros.bringup.node_table``, which
``brainmem-ros bringup`` (the same stack without ``ros2 launch``) reads too. Every node reads the
same parameter file (config/memory.yaml by default). If a memory node exits (a bad parameter, a
store it cannot open), the whole launch stops with the reason.
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, LogInfo, OpaqueFunction
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from brainmem_ros.bringup.node_table import check_namespace, default_config, stack

_TRUE = ("true", "1", "yes", "on")


def _nodes(context):
    config = LaunchConfiguration("config").perform(context)
    store = LaunchConfiguration("store").perform(context)
    namespace = check_namespace(LaunchConfiguration("namespace").perform(context))
    sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in _TRUE
    demo = LaunchConfiguration("demo").perform(context).lower() in _TRUE
    captions = LaunchConfiguration("captions").perform(context).lower() in _TRUE
    shared = {"use_sim_time": sim_time}
    if store:
        shared["store.path"] = os.path.abspath(os.path.expanduser(store))
    fleet = LaunchConfiguration("fleet").perform(context)
    if fleet:
        shared["fleet.dsn"] = fleet
    nodes = []
    for spec in stack(demo, captions):
        on_exit = [LogInfo(msg=f"{spec.name} exited: stopping the memory stack"),
                   EmitEvent(event=Shutdown(reason=f"{spec.name} exited"))] if spec.memory else None
        nodes.append(Node(package="brainmem_ros", executable=spec.name, name=spec.name,
                          namespace=namespace, output="screen",
                          parameters=[config, shared, dict(spec.parameters)],
                          arguments=["--ros-args", "--log-level",
                                     LaunchConfiguration("log_level").perform(context)],
                          on_exit=on_exit))
    return nodes


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value=str(default_config()),
                              description="parameter file read by every node"),
        DeclareLaunchArgument("store", default_value="",
                              description="SQLite file of long-term memory (empty: store.path "
                              "from the config)"),
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace of every topic and service of the stack"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="take time from /clock (simulators, bag replay)"),
        DeclareLaunchArgument("log_level", default_value="info", description="ROS log level"),
        DeclareLaunchArgument("demo", default_value="false",
                              description="also start kitchen_sim_node and a scripted "
                              "planner_node (kitchen episodes)"),
        DeclareLaunchArgument("fleet", default_value="",
                              description="PostgreSQL connection string of the fleet's server "
                              "(empty: this robot shares nothing)"),
        DeclareLaunchArgument("captions", default_value="false",
                              description="also start caption_node (captions placed at the "
                              "robot's pose become observations)"),
        OpaqueFunction(function=_nodes),
    ])
