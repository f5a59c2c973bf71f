"""How joints map onto servos: the frozen specs the HAL is built from.

A joint's position in SI units relates to its servo's raw ticks by::

    joint = offset + direction * (ticks - center_ticks) * radians_per_tick / gear_ratio

where ``center_ticks`` and ``radians_per_tick`` come from the model's control table
(``hilbot.hal.dynamixel.tables``). A shadow servo drives the same joint as its primary
(the WidowX-250 shoulder has two, one mirrored): it is commanded with the same joint
position through its own offset and direction, and is not a joint of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_SERVO_ID = 252  # 253 is reserved and 254 is the broadcast id in both protocols
#: Operating modes a config may ask for (``None``: as the servo is); all are position modes.
SERVO_MODES = frozenset({None, "position", "extended_position", "current_position"})


@dataclass(frozen=True, slots=True)
class BusSpec:
    """One serial bus: the port, its baud rate [bit/s], the protocol version and servo family.

    ``family`` is ``"dynamixel"`` (``protocol`` 1 or 2) or ``"feetech"`` (STS/SCS, whose
    one protocol ignores ``protocol``).
    """

    port: str
    baudrate: int = 1_000_000
    protocol: int = 2
    family: str = "dynamixel"

    def __post_init__(self) -> None:
        if self.family not in ("dynamixel", "feetech"):
            raise ValueError(f"family must be dynamixel or feetech, got {self.family!r}")
        if self.protocol not in (1, 2):
            raise ValueError(f"protocol must be 1 or 2, got {self.protocol!r}")
        if self.baudrate <= 0:
            raise ValueError(f"baudrate must be positive, got {self.baudrate!r}")


@dataclass(frozen=True, slots=True)
class ServoSpec:
    """One servo: its bus id, model, the joint it drives, and the tick <-> joint conversion.

    Args:
        id: bus id, 0..252.
        model: model name as in the control tables, e.g. ``"XM430-W350"``.
        joint: name of the URDF joint this servo drives.
        offset: joint position [rad or m] when the servo is at its center tick.
        direction: +1, or -1 when the servo turns opposite to the joint axis.
        gear_ratio: joint turns per servo turn is ``1 / gear_ratio``; for a prismatic
            joint it is servo radians per joint metre.
        shadow_of: the id of the primary servo when this one mirrors it on the same joint.
        mode: the operating mode written at start-up: ``"position"``,
            ``"extended_position"`` or ``"current_position"`` (current-based position
            control: a gripper that closes on an object stops at ``current_limit`` and
            holds); ``None`` leaves the servo's mode as it is.
        current_limit: [A] the most current the motor may draw (Current Limit, and Goal
            Current in current-based position control).
        profile_velocity: [rad/s] of the servo's own motion profile (0: unlimited).
        profile_acceleration: [rad/s²] of it.
        torque_limit: a fraction (0, 1] of the servo's maximum torque, written to a
            Feetech servo's Torque Limit at start-up (a gripper that closes on an object
            pushes with at most that); the Dynamixel counterpart is ``current_limit``.
    """

    id: int
    model: str
    joint: str
    offset: float = 0.0
    direction: int = 1
    gear_ratio: float = 1.0
    shadow_of: int | None = None
    mode: str | None = None
    current_limit: float | None = None
    profile_velocity: float | None = None
    profile_acceleration: float | None = None
    torque_limit: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in SERVO_MODES:
            known = ", ".join(sorted(m for m in SERVO_MODES if m is not None))
            raise ValueError(f"servo {self.id}: mode must be one of {known}, got {self.mode!r}")
        for name in ("current_limit", "profile_velocity", "profile_acceleration"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"servo {self.id}: {name} must be finite and >= 0, got {value!r}")
        limit = self.torque_limit
        if limit is not None and not (math.isfinite(limit) and 0.0 < limit <= 1.0):
            raise ValueError(f"servo {self.id}: torque_limit must be in (0, 1], got {limit!r}")
        if not 0 <= self.id <= MAX_SERVO_ID:
            raise ValueError(f"servo id must be in 0..{MAX_SERVO_ID}, got {self.id!r}")
        if self.direction not in (1, -1):
            raise ValueError(f"servo {self.id}: direction must be 1 or -1, got {self.direction!r}")
        if not (self.gear_ratio > 0 and math.isfinite(self.gear_ratio)):
            raise ValueError(f"servo {self.id}: gear_ratio must be positive and finite")
        if not math.isfinite(self.offset):
            raise ValueError(f"servo {self.id}: offset must be finite, got {self.offset!r}")
        if self.shadow_of == self.id:
            raise ValueError(f"servo {self.id}: shadow_of names itself")
