"""ROS parameters from the one declaration in ``brainmem_ros.core.config``.

Each core parameter becomes a declared ROS parameter with its description and range; values are
validated together at start.
"""
from __future__ import annotations

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType, SetParametersResult)
from rclpy.node import Node
from rclpy.parameter import Parameter

from brainmem_ros.core.config import ConfigError, MemoryConfig, iter_params

__all__ = ["declare_memory_parameters", "declare", "LIVE_SECTIONS", "reject_or_apply"]

# Changing these while running is safe: they are read on every call.
LIVE_SECTIONS = ("retrieval.", )

_TYPES = {
    bool: ParameterType.PARAMETER_BOOL,
    int: ParameterType.PARAMETER_INTEGER,
    float: ParameterType.PARAMETER_DOUBLE,
    str: ParameterType.PARAMETER_STRING,
    list: ParameterType.PARAMETER_STRING_ARRAY
}


def declare(node: Node, name: str, default, description: str, lo=None, hi=None, read_only=False,
            any_type=False):
    """Declare one node-specific parameter with its description and range; return its value.

    ``any_type``: a text parameter whose value may look like a number on the command line
    (``seeds:=26`` arrives as an integer), returned as text.
    """
    descriptor = ParameterDescriptor(description=description, type=_TYPES[type(default)],
                                     read_only=read_only, dynamic_typing=any_type)
    if any_type:
        return str(node.declare_parameter(name, default, descriptor).value)
    if isinstance(default, int) and not isinstance(default, bool) and lo is not None:
        descriptor.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
    elif isinstance(default, float) and lo is not None:
        descriptor.floating_point_range = [
            FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)
        ]
    if isinstance(default, list) and not default:
        node.declare_parameter(name, Parameter.Type.STRING_ARRAY, descriptor)
        try:
            value = node.get_parameter(name).value
        except Exception:  # declared without a value: the empty default
            value = None
        return list(value or [])
    return node.declare_parameter(name, default, descriptor).value


def declare_memory_parameters(node: Node) -> MemoryConfig:
    """Declare every core parameter; raise ConfigError naming each bad value."""
    values = {}
    for param in iter_params():
        lo, hi = param.range
        try:
            values[param.name] = declare(
                node, param.name, param.default, param.description +
                (f" (one of {', '.join(param.choices)})" if param.choices else ""), lo, hi)
        except Exception as exc:  # rclpy refuses out-of-range or mistyped overrides
            raise ConfigError(f"parameter {param.name}: {exc}") from exc
    return MemoryConfig.from_flat(values)


def reject_or_apply(node: Node, params: list, current: MemoryConfig, apply) -> SetParametersResult:
    """Validate and apply live retrieval settings; refuse the others with a reason."""
    known = {p.name for p in iter_params()}
    changes = {p.name: p.value for p in params if p.name in known}
    if not changes:
        return SetParametersResult(successful=True)
    fixed = [name for name in changes if not name.startswith(LIVE_SECTIONS)]
    if fixed:
        return SetParametersResult(
            successful=False,
            reason=f"{', '.join(fixed)} are read at start: restart the node to change them")
    try:
        updated = current.replace(**changes)
    except ConfigError as exc:
        return SetParametersResult(successful=False, reason=str(exc))
    apply(updated)
    return SetParametersResult(successful=True)
