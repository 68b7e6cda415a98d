"""brainmem_ros: brain-inspired, evolving memory for LLM-driven robots.

The generated ROS interfaces (``brainmem_ros.msg``, ``brainmem_ros.srv``) are installed beside this
package by the CMake build. ``extend_path`` lets a checkout of the sources that comes first on
``sys.path`` (running from the repository root) still find them in the installed copy.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
