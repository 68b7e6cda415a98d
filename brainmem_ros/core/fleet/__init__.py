"""The fleet: memories shared between robots through a PostgreSQL server (``docs/fleet.md``)."""
from brainmem_ros.core.fleet.policy import SharePolicy
from brainmem_ros.core.fleet.sync import FleetSync

__all__ = ["SharePolicy", "FleetSync"]
