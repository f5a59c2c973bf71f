"""Telemetry payloads: runtime state -> JSON for the ``state`` and ``status`` topics."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from hilbot.kinematics.spatial import matrix_to_quat

#: Floats are rounded to this many decimals: 1 µm / 1 µrad / 1 µs, and shorter JSON.
DECIMALS = 6


def to_jsonable(value: Any) -> Any:
    """Convert a state value to JSON types.

    Dataclasses and named tuples become objects with their field names, enums
    their values, numpy arrays nested lists, and non-finite floats ``null``
    (JSON has no NaN).
    """
    match value:
        case None | bool() | str():
            return value
        case enum.Enum():
            return to_jsonable(value.value)
        case int() | np.integer():
            return int(value)
        case float() | np.floating():
            number = float(value)
            return round(number, DECIMALS) if math.isfinite(number) else None
        case np.ndarray():
            return [to_jsonable(v) for v in value.tolist()]
        case Mapping():
            return {str(to_jsonable(k)): to_jsonable(v) for k, v in value.items()}
        case tuple() if hasattr(value, "_fields"):
            return {f: to_jsonable(getattr(value, f)) for f in value._fields}
        case list() | tuple() | set() | frozenset():
            return [to_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return str(value)


def encode(payload: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes of an already-jsonable mapping."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()


def pose_json(pose: Any) -> dict[str, Any]:
    """``{"position": [x, y, z], "orientation": {"w", "x", "y", "z"}}`` of a 4 x 4 pose."""
    matrix = np.asarray(pose, dtype=np.float64)
    w, x, y, z = matrix_to_quat(matrix[:3, :3]).tolist()
    return {
        "position": to_jsonable(matrix[:3, 3]),
        "orientation": to_jsonable({"w": w, "x": x, "y": y, "z": z}),
    }


def joints_json(joints: Any) -> dict[str, Any] | None:
    """Joint state as parallel arrays in ``names`` order, or None before the first read."""
    if joints is None:
        return None
    return {
        "names": list(joints.names),
        "position": to_jsonable(joints.position),
        "velocity": to_jsonable(joints.velocity),
        "effort": to_jsonable(joints.effort),
        "effort_unit": to_jsonable(joints.effort_unit),
        "temperature": to_jsonable(joints.temperature),
        "hardware_errors": [flag.describe() for flag in joints.hardware_errors],
    }


def state_body(state: Any) -> dict[str, Any]:
    """The ``state`` topic payload without ``stamp`` and ``teleop`` (see ``docs/teleop.md``).

    Args:
        state: ``runtime.state()``, a ``hilbot.driver.state.RuntimeState``; a
            mapping is taken to be a body already (from the teleop worker's parent).
    """
    if isinstance(state, Mapping):
        return dict(state)
    return {
        "mode": to_jsonable(state.mode),
        "joints": joints_json(state.joints),
        "command": to_jsonable(state.command),
        "chains": {name: pose_json(pose) for name, pose in state.poses.items()},
        "faults": to_jsonable(state.faults),
        "watchdog_tripped": state.watchdog_tripped,
        "homing": state.homing,
        "clamp_counts": to_jsonable(state.clamp_counts),
        "stats": to_jsonable(state.stats),
        "glitches": dict(state.glitches),
        "last_stop": _stop_json(state.last_stop, state.joints),
    }


def _stop_json(stop: Any, joints: Any) -> dict[str, Any] | None:
    """The last controlled stop, as the state topic carries it."""
    if stop is None:
        return None
    names = tuple(joints.names) if joints is not None else ()
    j = int(stop.distance.argmax()) if stop.distance.size else 0
    return {
        "reason": stop.reason,
        "duration": round(float(stop.duration), DECIMALS),
        "time_bound": round(float(stop.time_bound), DECIMALS),
        "joint": names[j] if j < len(names) else None,
        "distance": round(float(stop.distance[j]), DECIMALS) if stop.distance.size else 0.0,
        "distance_bound": (
            round(float(stop.distance_bound[j]), DECIMALS) if stop.distance.size else 0.0
        ),
        "within_bounds": bool(stop.within_bounds),
    }


def status_payload(
    *,
    online: bool,
    mode: str | None,
    faults: Any,
    stamp: float,
    retained_estop: Mapping[str, Any] | None = None,
    identity: Mapping[str, Any] | None = None,
) -> bytes:
    """The retained ``status`` payload (also the last will, with ``online`` false).

    ``retained_estop`` (None: there is none) says that a retained ``estop`` on
    ``cmd`` e-stopped the robot, and with which command to clear it. ``identity``
    holds the driver's ``instance``, ``started`` and ``takeover`` fields
    (:meth:`hilbot.driver.teleop.bridge.Instance.fields`).
    """
    return encode(
        {
            "online": online,
            "mode": mode,
            "armed": mode == "armed",
            "estopped": mode == "estopped",
            "faults": to_jsonable(faults),
            "stamp": round(stamp, DECIMALS),
            "retained_estop": None if retained_estop is None else dict(retained_estop),
            **(identity or {}),
        }
    )
