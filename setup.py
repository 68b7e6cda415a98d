"""Plain `pip install .` of the pure-Python parts (the memory core and its CLI).

The ROS 2 package itself is built by CMake (package.xml declares ament_cmake); this file is for
users who want the core library without a ROS build. Metadata lives in setup.cfg.
"""
from setuptools import setup

setup()
