"""Start-up settings from the config: operating mode, current limit, motion profile.

Written once the servos are identified and inspected, each read back. Operating Mode and
Current Limit are EEPROM (writable with torque off only; written only when they differ);
Goal Current and the profiles are RAM. In current-based position control (mode 5) Goal
Current caps the motor current (e-manual, Operating Mode(11), Goal Current(102)): a
gripper closing on an object stops there and holds without overloading.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.layout import ServoSlot
from hilbot.hal.dynamixel.series_tables import OperatingMode
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.errors import StartupError, StartupProblem

N = RegisterName
#: Config mode names -> Operating Mode values.
MODES = {
    "position": OperatingMode.POSITION,
    "extended_position": OperatingMode.EXTENDED_POSITION,
    "current_position": OperatingMode.CURRENT_BASED_POSITION,
}
#: Profile Acceleration unit of the X series, 214.577 rev/min² (e-manual, address 108).
ACCELERATION_UNIT = 214.577 * 2.0 * math.pi / 3600.0  # [rad/s²]


def _read(bus: DynamixelBus, slot: ServoSlot, name: RegisterName) -> int:
    reg = slot.model.register(name)
    return reg.decode(bus.read(slot.id, reg.address, reg.size)[0])


def _refuse(slot: ServoSlot, message: str, expected: object = None) -> StartupError:
    return StartupError(
        f"servo {slot.id} (joint {slot.units.spec.joint!r}, {slot.model.name}): {message}",
        servo_id=slot.id,
        problem=StartupProblem.WRONG_MODE,
        expected=expected,
    )


def _require(slot: ServoSlot, name: RegisterName) -> None:
    """Refuse a config setting for a register the servo's model does not have."""
    if name not in slot.model.table:
        raise _refuse(slot, f"this model has no {name.value} register for the config's setting")


def _write(bus: DynamixelBus, slot: ServoSlot, name: RegisterName, value: int) -> None:
    _require(slot, name)
    reg = slot.model.register(name)
    if not reg.min <= value <= reg.max:
        raise _refuse(slot, f"{name.value} {value} is outside {reg.min}..{reg.max}")
    bus.write(slot.id, reg.address, reg.encode(value))
    back = _read(bus, slot, name)
    if back != value:
        raise _refuse(slot, f"{name.value} reads {back} after writing {value}", value)


def _eeprom(bus: DynamixelBus, slot: ServoSlot, name: RegisterName, value: int) -> None:
    """Write an EEPROM setting if it differs; that needs torque off."""
    _require(slot, name)  # before reading it
    if _read(bus, slot, name) == value:
        return
    if _read(bus, slot, N.TORQUE_ENABLE):
        raise _refuse(
            slot,
            f"{name.value} must become {value}, which needs torque off; it is on "
            "(power-cycle the servo or turn its torque off first)",
            value,
        )
    _write(bus, slot, name, value)


def configure(bus: DynamixelBus, slot: ServoSlot, log: logging.Logger) -> None:
    """Write one servo's configured mode, current limit and profiles; read them back.

    Raises:
        StartupError: a setting the model lacks, out of range, refused while torque is
            on, or read back different.
    """
    spec, model = slot.units.spec, slot.model
    if spec.mode is not None:
        mode = MODES[spec.mode]
        if model.protocol != 2 or N.OPERATING_MODE not in model.table:
            raise _refuse(slot, f"Protocol 1.0 servos have no operating mode {spec.mode}")
        if mode not in model.operating_modes:
            raise _refuse(slot, f"this model has no {spec.mode} mode", mode)
        _eeprom(bus, slot, N.OPERATING_MODE, int(mode))
    if spec.current_limit is not None:
        _require(slot, N.CURRENT_LIMIT)  # before converting amps with the model's unit
        ticks = round(spec.current_limit / model.effort_per_tick)
        _eeprom(bus, slot, N.CURRENT_LIMIT, ticks)
        if N.GOAL_CURRENT in model.table:
            _write(bus, slot, N.GOAL_CURRENT, ticks)
    if spec.profile_velocity is not None:
        value = round(spec.profile_velocity / model.rad_per_s_per_velocity_tick)
        _write(bus, slot, N.PROFILE_VELOCITY, value)
    if spec.profile_acceleration is not None:
        _write(
            bus, slot, N.PROFILE_ACCELERATION, round(spec.profile_acceleration / ACCELERATION_UNIT)
        )
    if spec.mode or spec.current_limit or spec.profile_velocity or spec.profile_acceleration:
        log.info("servo %d: start-up settings written and read back", slot.id)


def configure_all(bus: DynamixelBus, slots: Sequence[ServoSlot], log: logging.Logger) -> None:
    """:func:`configure` every servo."""
    for slot in slots:
        configure(bus, slot, log)
