"""Start-up checks of a Dynamixel bus, run once when the backend opens.

For every configured servo: ping it and compare the model number with the
configuration, read firmware, return delay time, operating mode and status
return level, and the latched hardware-error status. Problems that make the
robot unsafe or unusable raise :class:`~hilbot.hal.errors.StartupError` naming
the servo; slow settings (a non-zero return delay time) only warn, saying how
to fix them. Nothing here enables torque.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.layout import BusLayout, ServoSlot
from hilbot.hal.dynamixel.protocol import hardware_flags_from_protocol1
from hilbot.hal.dynamixel.series_tables import XL320_JOINT
from hilbot.hal.dynamixel.tables import OperatingMode, RegisterName, model_by_number
from hilbot.hal.errors import CommTimeout, CrcError, StartupError, StartupProblem

N = RegisterName
#: How long start-up keeps pinging a servo that does not answer [s]. A servo answers
#: within its return delay time once it runs, but one that was just powered (or a bus
#: adapter just opened) can miss the first packets; start-up is not time-critical.
PING_PATIENCE = 0.3
PING_PAUSE = 0.02  # [s] between start-up pings
POSITION_MODES = frozenset(
    {OperatingMode.POSITION, OperatingMode.EXTENDED_POSITION, OperatingMode.CURRENT_BASED_POSITION}
)


@dataclass(frozen=True, slots=True)
class ServoReport:
    """What start-up found on one servo."""

    id: int
    model: str
    firmware: int
    return_delay_time: int  # register value, 2 µs units
    hardware_errors: HardwareErrorFlags


def _value(slot: ServoSlot, data: bytes, base: int, name: RegisterName) -> int:
    reg = slot.model.register(name)
    return reg.decode(data[reg.address - base : reg.address - base + reg.size])


def identify(bus: DynamixelBus, slot: ServoSlot) -> None:
    """Ping ``slot``'s servo and check its model number against the configuration.

    Raises:
        StartupError: the servo does not answer, or is another or an unsupported model.
    """
    spec = slot.units.spec
    number = patient_ping(bus, spec.id)
    if number is None:
        raise StartupError(
            f"servo {spec.id} (joint {spec.joint!r}, {spec.model}) does not answer on "
            f"{bus.port_name} at {bus.baudrate} bit/s, protocol {bus.protocol}.0; check power, "
            "cabling, its id, baud rate and firmware protocol (an MX with 1.0 firmware does "
            f"not hear 2.0; `hilbot scan --port {bus.port_name}` lists what answers, on both)",
            servo_id=spec.id,
            problem=StartupProblem.MISSING,
            expected=spec.model,
        )
    found = model_by_number(bus.protocol, number)
    if found is None:
        raise StartupError(
            f"servo {spec.id} reports model number {number}, which hilbot does not support "
            f"(configured: {spec.model})",
            servo_id=spec.id,
            problem=StartupProblem.UNSUPPORTED_MODEL,
            expected=spec.model,
            found=number,
        )
    if found.name != slot.model.name:
        raise StartupError(
            f"servo {spec.id} (joint {spec.joint!r}) is a {found.name}, but the configuration "
            f"says {slot.model.name}; fix the model in the config or the servo's id",
            servo_id=spec.id,
            problem=StartupProblem.WRONG_MODEL,
            expected=slot.model.name,
            found=found.name,
        )


def inspect(bus: DynamixelBus, slot: ServoSlot, log: logging.Logger) -> ServoReport:
    """Read the settings start-up checks, for one identified servo.

    Raises:
        StartupError: not in a position mode, or status return level 0.
    """
    spec = slot.units.spec
    m = slot.model
    # One read covers model number .. the mode: Operating Mode (X series: 0..11), Control
    # Mode (XL-320: 0..11), or the angle limits (1.0: 0..9).
    mode = next(n for n in (N.OPERATING_MODE, N.CONTROL_MODE, N.CCW_ANGLE_LIMIT) if m.has(n))
    end = m.register(mode).end
    srl = m.register(N.STATUS_RETURN_LEVEL)
    try:
        eeprom, _ = bus.read(spec.id, 0, end)
    except CommTimeout:
        # It answered the ping (always answered) but not a read: Status Return Level 0.
        raise StartupError(
            f"servo {spec.id} answers ping but not reads: its Status Return Level (address "
            f"{srl.address}) is probably 0; set it to 2 (or 1)",
            servo_id=spec.id,
            problem=StartupProblem.NO_STATUS_RETURN,
            expected=2,
            found=0,
        ) from None
    firmware = _value(slot, eeprom, 0, N.FIRMWARE_VERSION)
    rdt = _value(slot, eeprom, 0, N.RETURN_DELAY_TIME)
    _check_mode(slot, eeprom)
    if rdt:
        log.warning(
            "servo %d: Return Delay Time is %d µs (register value %d); every reply waits that "
            "long. Set it to 0: hilbot servo --port %s --id %d --return-delay 0",
            spec.id,
            2 * rdt,
            rdt,
            bus.port_name,
            spec.id,
        )
    return ServoReport(spec.id, m.name, firmware, rdt, hardware_status(bus, slot))


def _check_mode(slot: ServoSlot, eeprom: bytes) -> None:
    spec = slot.units.spec
    if slot.model.has(N.CONTROL_MODE):
        mode = _value(slot, eeprom, 0, N.CONTROL_MODE)
        if mode != XL320_JOINT:
            raise StartupError(
                f"servo {spec.id} (joint {spec.joint!r}) is in wheel mode (Control Mode {mode}); "
                f"hilbot commands positions: set Control Mode (address 11) to {XL320_JOINT} "
                "(joint) with torque off",
                servo_id=spec.id,
                problem=StartupProblem.WRONG_MODE,
                expected="joint",
                found="wheel",
            )
        return
    if slot.model.has(N.OPERATING_MODE):
        mode = _value(slot, eeprom, 0, N.OPERATING_MODE)
        if mode not in POSITION_MODES:
            name = OperatingMode(mode).name if mode in set(OperatingMode) else str(mode)
            raise StartupError(
                f"servo {spec.id} (joint {spec.joint!r}) is in operating mode {name} ({mode}); "
                "hilbot commands positions: set Operating Mode (address 11) to 3 (position) "
                "with torque off",
                servo_id=spec.id,
                problem=StartupProblem.WRONG_MODE,
                expected=OperatingMode.POSITION,
                found=mode,
            )
        return
    cw = _value(slot, eeprom, 0, N.CW_ANGLE_LIMIT)
    ccw = _value(slot, eeprom, 0, N.CCW_ANGLE_LIMIT)
    if cw == 0 and ccw == 0:
        raise StartupError(
            f"servo {spec.id} (joint {spec.joint!r}) is in wheel mode (both angle limits 0); "
            f"set CCW Angle Limit (address 8) to {slot.model.position_max} for joint mode",
            servo_id=spec.id,
            problem=StartupProblem.WRONG_MODE,
            expected="joint",
            found="wheel",
        )


def patient_ping(bus: DynamixelBus, servo_id: int) -> int | None:
    """Ping until the servo answers or ``PING_PATIENCE`` runs out; its model number or None."""
    deadline = time.monotonic() + PING_PATIENCE
    while True:
        try:
            return bus.ping(servo_id)
        except (CommTimeout, CrcError):
            if time.monotonic() + PING_PAUSE > deadline:
                return None
        time.sleep(PING_PAUSE)


def hardware_status(bus: DynamixelBus, slot: ServoSlot) -> HardwareErrorFlags:
    """The servo's latched hardware-error status.

    Protocol 2.0 has a register for it (its bits the model's); Protocol 1.0 reports the
    same bits in every status packet's ERR byte, so a 1-byte read's ERR is used.
    """
    if slot.model.has(N.HARDWARE_ERROR_STATUS):
        reg = slot.model.register(N.HARDWARE_ERROR_STATUS)
        data, _ = bus.read(slot.id, reg.address, 1)
        return slot.model.hardware_errors(reg.decode(data))
    _, error = bus.read(slot.id, slot.model.register(N.PRESENT_TEMPERATURE).address, 1)
    return hardware_flags_from_protocol1(error)


def check_bus(bus: DynamixelBus, layout: BusLayout, log: logging.Logger) -> list[ServoReport]:
    """Identify and inspect every servo of ``layout``; set the bus's reply timing."""
    for slot in layout.slots:
        identify(bus, slot)
    reports = [inspect(bus, slot, log) for slot in layout.slots]
    bus.set_return_delay(max(r.return_delay_time for r in reports))
    for r in reports:
        if r.hardware_errors:
            log.warning(
                "servo %d reports a hardware error at start-up: %s; reboot it once the cause "
                "is fixed",
                r.id,
                r.hardware_errors.describe(),
            )
    return reports
