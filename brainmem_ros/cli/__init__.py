"""The ``brainmem-ros`` command: thin verbs over the package's library functions (``main``)."""
from brainmem_ros.cli.main import build_parser, main

__all__ = ["main", "build_parser"]
