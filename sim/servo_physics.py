"""Physical parameters of each simulated servo model, from the ROBOTIS datasheets.

These are the numbers the dynamics model (``hilbot.sim.servo_model``) needs and the
control tables (``hilbot.hal.dynamixel.tables``) do not hold: stall torque, no-load
speed, stall current, thermal behaviour. Figures are the e-manual "Specifications"
tables at the nominal voltage (https://emanual.robotis.com/docs/en/dxl/), rounded;
the position-loop bandwidth and the thermal constants are not published and are
plausible defaults. Encoder resolution, range and units come from the control tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from hilbot.hal.backend import EffortUnit
from hilbot.hal.dynamixel import tables
from hilbot.hal.feetech import tables as feetech_tables
from hilbot.hal.feetech.tables import FeetechRegister

RPM = 2.0 * math.pi / 60.0  # [rad/s] per rpm


@dataclass(frozen=True, slots=True)
class ServoPhysics:
    """What the dynamics model needs to know about one servo model.

    Args:
        model: model name, e.g. ``"XM430-W350"``.
        ticks_per_rev: encoder resolution [ticks/rev].
        center_tick: tick at the middle of the range (joint offset reference).
        min_tick: lowest position the servo reaches in position mode [ticks].
        max_tick: highest position the servo reaches in position mode [ticks].
        stall_torque: [N·m] at the nominal voltage.
        no_load_speed: [rad/s] at the nominal voltage.
        stall_current: [A] at the nominal voltage.
        nominal_voltage: [V].
        velocity_resolution: unit of the Present Velocity register [rad/s].
        effort_unit: ``AMPERE`` when the model senses current, else ``PERCENT`` (load).
        temperature_limit: overheating threshold [°C] (Temperature Limit default).
        bandwidth: natural frequency of the position loop [rad/s].
        damping_ratio: of the position loop (1 = critically damped).
        saturation_error: tracking error [rad] at which the loop reaches stall torque.
        friction: Coulomb friction of the gearbox [N·m]; holds a limp joint.
        viscous: viscous friction [N·m·s/rad].
        stall_temperature_rise: steady-state heating at stall current [K].
        thermal_time_constant: [s].
        overload_fraction: torque, as a fraction of stall, counted as overload.
        overload_time: how long overload must last before the error latches [s].
    """

    model: str
    ticks_per_rev: float = 4096.0
    center_tick: int = 2048
    min_tick: int = 0
    max_tick: int = 4095
    stall_torque: float = 4.1
    no_load_speed: float = 46.0 * RPM
    stall_current: float = 2.3
    nominal_voltage: float = 12.0
    velocity_resolution: float = 0.229 * RPM
    effort_unit: EffortUnit = EffortUnit.AMPERE
    temperature_limit: float = 80.0
    bandwidth: float = 100.0
    damping_ratio: float = 1.0
    saturation_error: float = 0.05
    friction: float = 0.05
    viscous: float = 0.01
    stall_temperature_rise: float = 90.0
    thermal_time_constant: float = 180.0
    overload_fraction: float = 0.9
    overload_time: float = 1.5

    def __post_init__(self) -> None:
        positive = (
            "ticks_per_rev",
            "stall_torque",
            "no_load_speed",
            "stall_current",
            "nominal_voltage",
            "velocity_resolution",
            "bandwidth",
            "damping_ratio",
            "saturation_error",
            "thermal_time_constant",
            "overload_fraction",
        )
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"{self.model}: {name} must be positive, got {getattr(self, name)}"
                )
        if not self.min_tick <= self.center_tick <= self.max_tick:
            raise ValueError(f"{self.model}: center_tick outside [min_tick, max_tick]")

    @property
    def radians_per_tick(self) -> float:
        """Encoder quantum [rad/tick]."""
        return 2.0 * math.pi / self.ticks_per_rev

    @property
    def min_position(self) -> float:
        """Lowest shaft angle [rad] relative to the center tick."""
        return (self.min_tick - self.center_tick) * self.radians_per_tick

    @property
    def max_position(self) -> float:
        """Highest shaft angle [rad] relative to the center tick."""
        return (self.max_tick - self.center_tick) * self.radians_per_tick

    @property
    def stiffness(self) -> float:
        """Proportional gain of the position loop [N·m/rad]."""
        return self.stall_torque / self.saturation_error

    @property
    def inertia(self) -> float:
        """Effective inertia at the output [kg·m²], chosen so the loop has ``bandwidth``."""
        return self.stiffness / self.bandwidth**2


@dataclass(frozen=True, slots=True)
class _Datasheet:
    stall_torque: float  # [N·m]
    rpm: float  # no-load speed [rev/min]
    stall_current: float  # [A]
    voltage: float = 12.0  # [V]


# Keyed by the model name without its firmware suffix: an MX-28 has the same motor
# whether it runs Protocol 1.0 ("MX-28") or 2.0 ("MX-28(2.0)").
_DATASHEETS: dict[str, _Datasheet] = {
    "XL330-M077": _Datasheet(0.215, 383, 1.47, 5.0),
    "XL330-M288": _Datasheet(0.52, 103, 1.47, 5.0),
    "XL430-W250": _Datasheet(1.5, 57, 1.4),
    "XC430-W150": _Datasheet(1.6, 106, 1.4),
    "XC430-W240": _Datasheet(1.9, 70, 1.4),
    "XM430-W210": _Datasheet(3.0, 77, 2.3),
    "XM430-W350": _Datasheet(4.1, 46, 2.3),
    "XH430-W210": _Datasheet(2.6, 84, 2.3),
    "XH430-W350": _Datasheet(3.4, 46, 2.3),
    "XH430-V210": _Datasheet(2.8, 86, 2.3, 24.0),
    "XH430-V350": _Datasheet(4.0, 46, 2.3, 24.0),
    "XM540-W150": _Datasheet(7.3, 53, 4.4),
    "XM540-W270": _Datasheet(10.6, 30, 4.4),
    "XH540-W150": _Datasheet(7.1, 46, 4.2),
    "XH540-W270": _Datasheet(10.6, 30, 4.2),
    "MX-28": _Datasheet(2.5, 55, 1.4),
    "MX-64": _Datasheet(6.0, 63, 4.1),
    "MX-106": _Datasheet(8.4, 45, 5.2),
    "AX-12A": _Datasheet(1.5, 59, 1.5),
    "AX-18A": _Datasheet(1.8, 97, 2.2),
    "XL-320": _Datasheet(0.39, 114, 1.1, 7.4),
}


def _base_name(model: str) -> str:
    return model.split("(", 1)[0].strip().upper()


def known_models() -> tuple[str, ...]:
    """Names of the control-table models that also have physical parameters."""
    return tuple(name for name in tables.MODELS if _base_name(name) in _DATASHEETS)


def physics_for(model: str, **overrides: Any) -> ServoPhysics:
    """Physical parameters of ``model`` (a ``hilbot.hal.dynamixel.tables`` name).

    Encoder, range, velocity unit, effort unit and temperature limit come from the
    model's control table; torque, speed and current from its datasheet. Fields can
    be overridden, e.g. ``physics_for("XM430-W350", thermal_time_constant=5.0)``.

    Raises:
        KeyError: an unknown model, listing the known ones.
    """
    spec = tables.model(model)
    sheet = _DATASHEETS.get(_base_name(spec.name))
    if sheet is None:
        raise KeyError(
            f"no simulation parameters for {spec.name}; known: {', '.join(known_models())}"
        )
    limit = spec.table.get(tables.RegisterName.TEMPERATURE_LIMIT)
    physics = ServoPhysics(
        model=spec.name,
        ticks_per_rev=spec.ticks_per_rev,
        center_tick=spec.center_tick,
        min_tick=spec.position_min,
        max_tick=spec.position_max,
        stall_torque=sheet.stall_torque,
        no_load_speed=sheet.rpm * RPM,
        stall_current=sheet.stall_current,
        nominal_voltage=sheet.voltage,
        velocity_resolution=spec.rad_per_s_per_velocity_tick,
        effort_unit=spec.effort_unit,
        temperature_limit=float(limit.default) if limit is not None else 80.0,
        # Back-driving the gearbox: friction ~2 % and drag ~10 % of stall torque at
        # full speed, so that a limp joint coasts a fraction of a radian and stops.
        friction=0.02 * sheet.stall_torque,
        viscous=0.1 * sheet.stall_torque / (sheet.rpm * RPM),
    )
    return replace(physics, **overrides) if overrides else physics


# ------------------------------------------------------------------ feetech_physics
# Physical parameters of the simulated Feetech servos, for ``hilbot.sim.servo_model``.
KG_CM = 9.80665e-2  # [N·m] per kg·cm


@dataclass(frozen=True, slots=True)
class _Sheet:
    stall_torque: float  # [N·m]
    rpm: float  # no-load speed [rev/min]
    stall_current: float  # [A]


def _rpm(seconds_per_60_degrees: float) -> float:
    return 60.0 / (6.0 * seconds_per_60_degrees)


_SHEETS = {
    "STS3215": _Sheet(19.5 * KG_CM, _rpm(0.222), 2.7),
    "STS3215-12V": _Sheet(30.0 * KG_CM, _rpm(0.222), 2.7),
    "STS3250": _Sheet(50.0 * KG_CM, _rpm(0.133), 3.5),
    "SCS0009": _Sheet(2.3 * KG_CM, _rpm(0.1), 1.0),
}


def feetech_physics(name: str, **overrides: Any) -> ServoPhysics:
    """Dynamics parameters of Feetech model ``name``; fields can be overridden.

    Raises:
        KeyError: an unknown model, listing the known ones.
    """
    spec = feetech_tables.model(name)
    sheet = _SHEETS[spec.name]
    limit = spec.table[FeetechRegister.MAX_TEMPERATURE_LIMIT].default
    physics = ServoPhysics(
        model=spec.name,
        ticks_per_rev=spec.ticks_per_rev,
        center_tick=spec.center_tick,
        min_tick=0,
        max_tick=spec.position_max,
        stall_torque=sheet.stall_torque,
        no_load_speed=sheet.rpm * RPM,
        stall_current=sheet.stall_current,
        nominal_voltage=spec.nominal_voltage,
        # Present Speed counts steps per second: one speed unit is one tick per second.
        velocity_resolution=2.0 * math.pi / spec.ticks_per_rev,
        effort_unit=EffortUnit.PERCENT,
        temperature_limit=float(limit),
        friction=0.02 * sheet.stall_torque,
        viscous=0.1 * sheet.stall_torque / (sheet.rpm * RPM),
    )
    return replace(physics, **overrides) if overrides else physics
