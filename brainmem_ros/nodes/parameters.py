"""ROS parameters from the one declaration in ``brainmem_ros.core.config``.

Each core parameter becomes a declared ROS parameter with its description and range; values are
validated together at start, and every bad value is named. Only the retrieval settings can change
while a node runs (they are read on every call); a change to any other parameter is refused with a
reason, rather than accepted and silently ignored.
"""
from __future__ import annotations

from typing import Callable, Optional

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType, SetParametersResult)
from rclpy.node import Node
from rclpy.parameter import Parameter

from brainmem_ros.core.config import ConfigError, MemoryConfig, check_value, iter_params

__all__ = ["declare_memory_parameters", "declare", "LIVE_SECTIONS", "guard_parameters"]

# Changing these while running is safe: they are read on every call.
LIVE_SECTIONS = ("retrieval.", )
# Parameters rclpy itself owns and applies while running.
_ROS_OWNED = ("use_sim_time", "start_type_description_service")

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
        # An empty list has no element type to infer: declared as a string array, then given the
        # empty value unless the parameter file gave one (a parameter left without a value would
        # answer nothing to GetParameters, and `ros2 param dump` would show no parameters at all).
        declared = node.declare_parameter(name, Parameter.Type.STRING_ARRAY, descriptor)
        if declared.type_ is Parameter.Type.NOT_SET:
            node.set_parameters([Parameter(name, Parameter.Type.STRING_ARRAY, [])])
        return list(node.get_parameter(name).value or [])
    return node.declare_parameter(name, default, descriptor).value


def declare_memory_parameters(node: Node) -> MemoryConfig:
    """Declare every core parameter; raise one ConfigError naming every bad value."""
    values, problems = {}, []
    for param in iter_params():
        lo, hi = param.range
        choices = f" (one of {', '.join(param.choices)})" if param.choices else ""
        try:
            values[param.name] = check_value(param, declare(node, param.name, param.default,
                                                            param.description + choices, lo, hi))
        except ConfigError as exc:  # a value rclpy took but the core refuses (not one of choices)
            problems.append(str(exc))
        except Exception as exc:  # rclpy refuses out-of-range or mistyped overrides
            problems.append(_refusal(node, param, exc))
    if problems:
        raise ConfigError(f"{len(problems)} bad parameter value(s): " + "; ".join(problems))
    return MemoryConfig.from_flat(values)


def _refusal(node: Node, param, exc: Exception) -> str:
    """Name an override rclpy refused in the core's words, the same whichever way it arrived.

    rclpy keeps the overrides it was given (from a parameter file or ``-p``) only on a private
    attribute; without it, its own message is the reason.
    """
    override = getattr(node, "_parameter_overrides", {}).get(param.name)
    if override is not None:
        try:
            check_value(param, override.value)
        except ConfigError as refused:
            return str(refused)
    return f"{param.name}: {exc}"


def guard_parameters(node: Node, config: Optional[MemoryConfig] = None,
                     apply: Optional[Callable[[MemoryConfig], None]] = None) -> None:
    """Refuse changes to parameters read at start; validate and apply live retrieval settings.

    Register it after every parameter is declared: rclpy runs the callback for declarations too.
    """
    current = [config]  # the configuration as last applied

    def on_set(params) -> SetParametersResult:
        changes = {p.name: p.value for p in params if p.name not in _ROS_OWNED}
        live = {name: value for name, value in changes.items()
                if config is not None and apply is not None and name.startswith(LIVE_SECTIONS)}
        fixed = sorted(set(changes) - set(live))
        if fixed:
            return SetParametersResult(
                successful=False, reason=f"{', '.join(fixed)}: read at start, so a change would "
                "be ignored; restart the node with the new value")
        if live:
            try:
                updated = current[0].replace(**live)
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
            apply(updated)
            current[0] = updated
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)
