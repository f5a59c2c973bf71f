"""Joints <-> simulated servo shafts: the ``ServoSpec`` mapping, with shadows folded in.

The dynamics model works in shaft radians relative to the center tick; the backend
API works in joint units. Per joint (its primary servo)::

    joint = offset + direction * shaft / gear_ratio

A shadow servo mirrors its primary on the same joint: it is not simulated on its own,
it adds its torque (and current) to the joint's servo.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from hilbot.hal.backend import EffortUnit
from hilbot.hal.errors import CommandError, ConfigError
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.servo_physics import ServoPhysics

F64 = NDArray[np.float64]
_SLACK = 1e-12  # [rad] rounding slack at the range ends


class JointMap:
    """Which servos drive which joint, and the joint <-> shaft conversion.

    Args:
        servos: the robot's servo specs (primaries and shadows, any order).
        physics: ``{servo id: ServoPhysics}`` for every primary servo.

    Raises:
        ConfigError: duplicate ids or joints, a shadow of a missing servo or of another
            joint, or a servo without physics.
    """

    def __init__(self, servos: Sequence[ServoSpec], physics: Mapping[int, ServoPhysics]) -> None:
        if not servos:
            raise ConfigError("no servos given; a backend needs at least one joint", field="servos")
        ids = [s.id for s in servos]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ConfigError(
                f"servo ids used twice: {duplicates}", servo_id=duplicates[0], field="id"
            )
        primaries = [s for s in servos if s.shadow_of is None]
        by_id = {s.id: s for s in primaries}
        shadows: dict[int, list[int]] = {s.id: [] for s in primaries}
        for s in servos:
            if s.shadow_of is None:
                continue
            primary = by_id.get(s.shadow_of)
            if primary is None:
                raise ConfigError(
                    f"servo {s.id} shadows servo {s.shadow_of}, which is not a primary servo",
                    servo_id=s.id,
                    field="shadow_of",
                )
            if primary.joint != s.joint:
                raise ConfigError(
                    f"servo {s.id} shadows servo {primary.id} but names joint {s.joint!r}, "
                    f"not {primary.joint!r}",
                    servo_id=s.id,
                    field="joint",
                )
            shadows[primary.id].append(s.id)
        joints = [s.joint for s in primaries]
        twice = sorted({j for j in joints if joints.count(j) > 1})
        if twice:
            raise ConfigError(
                f"joints driven by two primary servos (use shadow_of): {twice}", field="joint"
            )
        self.names: tuple[str, ...] = tuple(joints)
        self.servo_ids: tuple[tuple[int, ...], ...] = tuple(
            (s.id, *shadows[s.id]) for s in primaries
        )
        self.physics: tuple[ServoPhysics, ...] = tuple(
            _fold(physics, s, len(shadows[s.id])) for s in primaries
        )
        self.offset: F64 = np.array([s.offset for s in primaries], dtype=np.float64)
        self.direction: F64 = np.array([float(s.direction) for s in primaries])
        self.gear_ratio: F64 = np.array([s.gear_ratio for s in primaries], dtype=np.float64)
        self.effort_units: tuple[EffortUnit, ...] = tuple(p.effort_unit for p in self.physics)
        self.has_current: NDArray[np.bool_] = np.array(
            [u is EffortUnit.AMPERE for u in self.effort_units]
        )
        self._index = {name: i for i, name in enumerate(self.names)}
        self._last_keys: tuple[str, ...] = ()
        self._last_index: tuple[list[int], list[tuple[float, float, float, float, float]]] = (
            [],
            [],
        )
        self._servo_joint = {sid: i for i, group in enumerate(self.servo_ids) for sid in group}
        ends = np.array(
            [[p.min_position, p.max_position] for p in self.physics], dtype=np.float64
        ).T
        a, b = (self.offset + self.direction * e / self.gear_ratio for e in ends)
        self.servo_lower: F64 = np.minimum(a, b)  # (n,) joint range the servo can reach
        self.servo_upper: F64 = np.maximum(a, b)
        self.lower: F64 = self.servo_lower  # (n,) accepted targets, see set_limits
        self.upper: F64 = self.servo_upper
        # Per joint on Python floats, for goal_to_shaft: lower, upper, offset, gear, direction.
        self._rows: list[tuple[float, float, float, float, float]] = _rows(self)

    def indices(self, joints: Iterable[str] | None) -> list[int]:
        """Indices of ``joints`` (all when ``None``); unknown names raise ``CommandError``."""
        if joints is None:
            return list(range(len(self.names)))
        if isinstance(joints, str):
            joints = [joints]
        out = []
        for joint in joints:
            i = self._index.get(joint)
            if i is None:
                raise CommandError(
                    f"unknown joint {joint!r}; known: {', '.join(self.names)}", joint=joint
                )
            out.append(i)
        return out

    def joint_of_servo(self, servo_id: int) -> int | None:
        """The joint index a servo drives, or ``None`` if the id is not configured."""
        return self._servo_joint.get(servo_id)

    def set_limits(self, limits: Mapping[str, tuple[float, float]]) -> None:
        """Restrict targets to configured joint limits, within the servo range.

        Raises:
            ConfigError: an unknown joint or a limit that is not a finite interval.
        """
        lower, upper = self.servo_lower.copy(), self.servo_upper.copy()
        for joint, (lo, hi) in limits.items():
            if joint not in self._index:
                raise ConfigError(
                    f"joint_limits names unknown joint {joint!r}; known: {', '.join(self.names)}",
                    field="joint_limits",
                )
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ConfigError(
                    f"joint_limits[{joint!r}] = ({lo}, {hi}) is not a finite interval",
                    field="joint_limits",
                )
            i = self._index[joint]
            lower[i], upper[i] = max(lo, lower[i]), min(hi, upper[i])
        self.lower, self.upper = lower, upper
        self._rows = _rows(self)
        self._last_keys = ()  # rows cached by goal_to_shaft are stale

    def to_shaft(self, positions: Mapping[str, float]) -> F64:
        """Shaft angles for joint positions; joints not named stay at the center tick."""
        shaft = np.zeros(len(self.names))
        if positions:
            index, values = self.goal_to_shaft(positions)
            shaft[index] = values
        return shaft

    def goal_to_shaft(self, positions: Mapping[str, float]) -> tuple[list[int], list[float]]:
        """Validate joint targets and convert them to shaft angles [rad].

        Raises:
            CommandError: naming the joint and value that is unknown, not finite, or
                outside the servo's range or the joint limits; nothing is converted then.
        """
        keys = tuple(positions)
        if keys == self._last_keys:  # the runtime writes the same joints every cycle
            index, rows = self._last_index
        else:
            index = self.indices(keys)
            rows = [self._rows[i] for i in index]
            self._last_keys, self._last_index = keys, (index, rows)
        shaft = []
        for k, (value, (lower, upper, offset, gear_ratio, direction)) in enumerate(
            zip(positions.values(), rows, strict=True)
        ):
            value = float(value)
            if not lower - _SLACK <= value <= upper + _SLACK:  # False for NaN
                raise self._refused(index[k], value, lower, upper)
            shaft.append((value - offset) * gear_ratio / direction)
        return index, shaft

    def _refused(self, i: int, value: float, lower: float, upper: float) -> CommandError:
        name = self.names[i]
        if not math.isfinite(value):
            reason = "is not a finite number"
        else:
            reason = f"is outside [{lower:.6g}, {upper:.6g}]"
        return CommandError(f"joint {name!r}: target {value!r} {reason}", joint=name, value=value)


def _rows(jm: JointMap) -> list[tuple[float, float, float, float, float]]:
    columns = (jm.lower, jm.upper, jm.offset, jm.gear_ratio, jm.direction)
    return list(zip(*(c.tolist() for c in columns), strict=True))


def _fold(physics: Mapping[int, ServoPhysics], spec: ServoSpec, shadows: int) -> ServoPhysics:
    p = physics.get(spec.id)
    if p is None:
        raise ConfigError(
            f"servo {spec.id} ({spec.model}): no simulation parameters",
            servo_id=spec.id,
            field="model",
        )
    if not shadows:
        return p
    k = 1 + shadows
    return replace(p, stall_torque=p.stall_torque * k, stall_current=p.stall_current * k)
