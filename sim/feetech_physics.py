"""Physical parameters of the simulated Feetech servos, for ``hilbot.sim.servo_model``.

Encoder resolution, range, speed unit and temperature limit come from the memory
tables (``hilbot.hal.feetech.tables``). Torque, speed and current are the product
pages' headline figures at the nominal voltage, rounded (STS3215 7.4 V: 19.5 kg·cm,
0.222 s/60°; STS3215 12 V: 30 kg·cm; STS3250: 50 kg·cm at 12 V; SCS0009: 2.3 kg·cm,
0.1 s/60° at 6 V); they set how fast and how hard a virtual servo moves, not any
register value. The position-loop and thermal constants are the Dynamixel models'
plausible defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from hilbot.hal.backend import EffortUnit
from hilbot.hal.feetech import tables
from hilbot.hal.feetech.register_names import FeetechRegister
from hilbot.sim.servo_physics import RPM, ServoPhysics

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
    spec = tables.model(name)
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
