"""What both simulated servo firmwares share: power-up and the live registers.

Both firmwares (``hilbot.sim.servo_firmware`` for Dynamixel, ``hilbot.sim.servo_firmware``
for Feetech) power up the same way (memory at its defaults with the bus's Baud Rate and
Return Delay Time, settings loaded, EEPROM limits applied, goal := present position)
and refresh their present-value registers from the dynamics model before a read.
Both answer every packet by their ID, bit rate, return delay and status level; reads are
hot, so those are cached and reloaded only after the memory's ``generation`` moved on
(a write, a reset). :class:`ServoFirmware` does that; a subclass brings its memory, its
own state, its live registers and how it applies its EEPROM and resets its goal.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

from hilbot.hal import registers
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.backend import WATCHDOG_UNIT
from hilbot.hal.dynamixel.protocol import (
    ALERT_BIT,
    Protocol1Error,
    StatusErrorCode,
    hardware_flags_from_protocol1,
    hardware_flags_to_protocol1,
)
from hilbot.hal.dynamixel.startup import ACCELERATION_UNIT
from hilbot.hal.dynamixel.tables import (
    Access,
    Area,
    ModelSpec,
    OperatingMode,
    Register,
    RegisterName,
)
from hilbot.hal.dynamixel.timing import RETURN_DELAY_UNIT
from hilbot.hal.feetech.protocol import hardware_flags, status_error
from hilbot.hal.feetech.tables import (
    POSITION_MODE,
    TORQUE_CALIBRATE,
    TORQUE_FULL_SCALE,
    FeetechModel,
    FeetechRegister,
)
from hilbot.hal.feetech.tables import RETURN_DELAY_UNIT as FEETECH_RETURN_DELAY_UNIT
from hilbot.sim.control_table_memory import (
    CheckedWrite,
    ControlTableMemory,
    FeetechMemory,
    WriteFault,
    WriteRefused,
    Written,
)
from hilbot.sim.servo_model import ServoModel


class FirmwareSpec(Protocol):
    """What the shared firmware needs of a servo model."""

    @property
    def baud_rates(self) -> Mapping[int, int]:
        """Baud Rate register value -> bit rate [bit/s]."""
        ...


class SettingNames(NamedTuple):
    """A family's names of the registers :class:`ServoFirmware` caches for every packet."""

    id: enum.Enum
    baud_rate: enum.Enum
    return_delay_time: enum.Enum
    status_level: enum.Enum


SpecT = TypeVar("SpecT", bound=FirmwareSpec)
RegT = TypeVar("RegT", bound=registers.Register)
RegT_contra = TypeVar("RegT_contra", bound=registers.Register, contravariant=True)
#: A live register's value source: bus time [s] -> register value.
LiveSource = Callable[[float], int]


class LiveMemory(Protocol[RegT_contra]):
    """A servo memory the model's present values are copied into."""

    @property
    def generation(self) -> int:
        """Moves on whenever a register changes."""
        ...

    def get(self, name: Any) -> int:
        """The value of the register ``name`` (one of the family's register names)."""
        ...

    def set_clamped(self, reg: RegT_contra, value: int) -> None:
        """Store ``value`` in ``reg``, clamped to what the register can hold."""
        ...


class ServoFirmware(ABC, Generic[SpecT, RegT]):
    """One simulated servo's firmware, from power-up on.

    A subclass sets ``settings`` and ``return_delay_unit`` and implements
    :meth:`_new_memory`, :meth:`_power_up_return_delay`, :meth:`_set_up`,
    :meth:`_load_own_config`, :meth:`_live_registers`, :meth:`_apply_eeprom` and
    :meth:`_reset_goal`.

    Args:
        spec: the model.
        servo_id: ID at first power-up.
        model: the dynamics model shared by the bus.
        index: this servo's index in ``model``.
        baud_value: Baud Rate register value at first power-up.
        return_delay_time: Return Delay Time register value at first power-up [2 µs],
            or ``None`` for the model's default.
    """

    #: The family's names of the ID, Baud Rate, Return Delay Time and status level registers.
    settings: ClassVar[SettingNames]
    #: The family's Return Delay Time unit [s] (its HAL's ``timing.RETURN_DELAY_UNIT``).
    return_delay_unit: ClassVar[float]
    memory: LiveMemory[RegT]
    _generation: int  # the memory's generation when the settings below were cached
    _id: int
    _baudrate: int | None
    _return_delay: float
    _status_return_level: int

    def __init__(
        self,
        spec: SpecT,
        servo_id: int,
        model: ServoModel,
        index: int,
        *,
        baud_value: int | None = None,
        return_delay_time: int | None = None,
    ) -> None:
        self.spec = spec
        self.model = model
        self.index = index
        self.memory = self._new_memory(servo_id, baud_value)
        if return_delay_time is not None:
            self._power_up_return_delay(return_delay_time)
        #: ``(address, data)`` of a REG WRITE waiting for ACTION.
        self.pending_write: tuple[int, bytes] | None = None
        self._set_up()
        self._live = self._live_registers()
        self._load_config()
        self._apply_eeprom()
        self._reset_goal()

    @abstractmethod
    def _new_memory(self, servo_id: int, baud_value: int | None) -> LiveMemory[RegT]:
        """The memory at first power-up, at the model's defaults but ID and Baud Rate."""

    @abstractmethod
    def _power_up_return_delay(self, value: int) -> None:
        """Make ``value`` [2 µs] the Return Delay Time the servo powers up with."""

    def _load_config(self) -> None:
        """Cache the registers the firmware consults on every packet (reads are hot)."""
        mem, names = self.memory, self.settings
        self._generation = mem.generation
        self._id = mem.get(names.id)
        self._baudrate = self.spec.baud_rates.get(mem.get(names.baud_rate))
        self._return_delay = mem.get(names.return_delay_time) * self.return_delay_unit
        self._status_return_level = mem.get(names.status_level)
        self._load_own_config()

    def _check_config(self) -> None:
        if self.memory.generation != self._generation:
            self._load_config()

    @property
    def id(self) -> int:
        """The ID register."""
        self._check_config()
        return self._id

    @property
    def baudrate(self) -> int | None:
        """Bit rate the servo listens at [bit/s], ``None`` for an unlisted register value."""
        self._check_config()
        return self._baudrate

    @property
    def return_delay(self) -> float:
        """Return Delay Time [s] (register value × 2 µs)."""
        self._check_config()
        return self._return_delay

    @property
    def status_return_level(self) -> int:
        """Which instructions are answered; the levels are the protocol's (see subclass)."""
        self._check_config()
        return self._status_return_level

    @property
    def hardware_error(self) -> HardwareErrorFlags:
        """The latched hardware errors."""
        return HardwareErrorFlags(int(self.model.hardware_error[self.index]))

    @abstractmethod
    def _load_own_config(self) -> None:
        """Cache the family's own settings (offset, limits, mode); ``_load_config`` calls it."""

    @abstractmethod
    def _set_up(self) -> None:
        """Set the subclass's own state; runs before the live registers are listed."""

    @abstractmethod
    def _live_registers(self) -> Sequence[tuple[RegT, LiveSource]]:
        """The registers the firmware keeps up to date, each with its value source."""

    @abstractmethod
    def _apply_eeprom(self) -> None:
        """Copy the limit and shutdown registers into the model."""

    @abstractmethod
    def _reset_goal(self) -> None:
        """Goal Position := Present Position, as at power-up."""

    def refresh(self, now: float, address: int = 0, length: int | None = None) -> None:
        """Copy the model's present values into the registers in ``[address, +length)``.

        ``length`` ``None`` refreshes every live register from ``address`` on.
        """
        self._check_config()
        for reg, value in self._live:
            if (length is None or reg.address < address + length) and address < reg.end:
                self.memory.set_clamped(reg, value(now))


def eeprom_spans(registers: Iterable[registers.Register]) -> tuple[tuple[int, int], ...]:
    """The ``(start, end)`` address runs the ``registers`` cover, merged and sorted."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted((r.address, r.end) for r in registers):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def masked(data: bytes | bytearray, spans: Sequence[tuple[int, int]]) -> bytes:
    """``data`` with every byte outside ``spans`` zero (an EEPROM image)."""
    out = bytearray(len(data))
    for start, end in spans:
        out[start:end] = data[start:end]
    return bytes(out)


# ------------------------------------------------------------------ virtual_servo
# One servo on the virtual bus: its control-table memory bound to the dynamics model.
N = RegisterName
#: MX(1.0) Goal Acceleration unit, 8.583 °/s² (e-manual, address 73).
MX1_ACCELERATION_UNIT = math.radians(8.583)  # [rad/s²]
#: MX-64/106 (1.0) Current register: I = 4.5 mA * (value - 2048) (e-manual, address 68).
MX1_CURRENT_UNIT = 0.0045  # [A]

#: The "Goal Value" registers a tripped Bus Watchdog makes read-only (e-manual, same section).
_GOALS = (N.GOAL_PWM, N.GOAL_CURRENT, N.GOAL_VELOCITY, N.GOAL_POSITION)
#: What a write refused by a tripped Bus Watchdog answers: the Data Range Error.
_WATCHDOG_REFUSAL = WriteRefused(WriteFault.RANGE, N.BUS_WATCHDOG)

#: Registers cached by ``VirtualServo._load_config`` (a write to one reloads the cache).
_CONFIG = (
    N.ID,
    N.BAUD_RATE,
    N.RETURN_DELAY_TIME,
    N.STATUS_RETURN_LEVEL,
    N.HOMING_OFFSET,
    N.MIN_POSITION_LIMIT,
    N.MAX_POSITION_LIMIT,
    N.CW_ANGLE_LIMIT,
    N.CCW_ANGLE_LIMIT,
)

_P2_FAULT = {
    WriteFault.ACCESS: StatusErrorCode.ACCESS_ERROR,
    WriteFault.RANGE: StatusErrorCode.DATA_RANGE_ERROR,
    WriteFault.LIMIT: StatusErrorCode.DATA_LIMIT_ERROR,
    WriteFault.LENGTH: StatusErrorCode.DATA_LENGTH_ERROR,
}


class VirtualServo(ServoFirmware[ModelSpec, Register]):
    """The firmware of one simulated servo.

    Built with :class:`~hilbot.sim.servo_firmware.ServoFirmware`'s arguments (``spec``
    a Dynamixel model: control table, units); ``return_delay_time`` ``None`` keeps the
    model's default (250 = 500 µs).
    """

    #: Status Return Level: 0 answers PING only; 1 PING and READ; 2 every instruction.
    settings = SettingNames(N.ID, N.BAUD_RATE, N.RETURN_DELAY_TIME, N.STATUS_RETURN_LEVEL)
    return_delay_unit = RETURN_DELAY_UNIT
    memory: ControlTableMemory

    def _new_memory(self, servo_id: int, baud_value: int | None) -> ControlTableMemory:
        return ControlTableMemory(self.spec, servo_id, baud_value)

    def _power_up_return_delay(self, value: int) -> None:
        self.memory.set(N.RETURN_DELAY_TIME, value)  # EEPROM: a reboot keeps it

    def _set_up(self) -> None:
        spec = self.spec
        self.protocol = spec.protocol
        self._angle_limits = N.CW_ANGLE_LIMIT in spec.table  # 1.0 tables and the XL-320
        self._tick_unit = 2.0 * math.pi / spec.ticks_per_rev  # [rad/tick]
        self._velocity_unit = spec.rad_per_s_per_velocity_tick  # [rad/s per tick]
        # Bus Watchdog (X series): armed timeout [s] (0 = off), whether it expired, and
        # when the last instruction packet for this servo arrived [s, bus clock].
        self.watchdog_timeout = 0.0
        self.watchdog_tripped = False
        self.heard_at = 0.0
        watchdog = spec.table.get(N.BUS_WATCHDOG)
        self._watchdog_address = -1 if watchdog is None else watchdog.address  # 1 byte
        self._goal_bytes = _addresses(spec, _GOALS)
        regs = spec.registers()
        self._eeprom_spans = eeprom_spans(r for r in regs if r.area is Area.EEPROM)
        self._config_addresses = _addresses(spec, _CONFIG)

    # ------------------------------------------------------------------ identity

    @property
    def firmware(self) -> int:
        """The Firmware Version register."""
        return self.memory.get(N.FIRMWARE_VERSION)

    def _load_own_config(self) -> None:
        """Cache Homing Offset and the position limits."""
        mem = self.memory
        self._homing = mem.get(N.HOMING_OFFSET) if mem.has(N.HOMING_OFFSET) else 0
        self._limits = self._position_limits()

    # ------------------------------------------------------------------ status byte

    def error_byte(self, code: StatusErrorCode = StatusErrorCode.NONE, p1: int = 0) -> int:
        """ERR byte of a status packet: the command result plus the hardware alert."""
        raw = int(self.model.hardware_error[self.index])
        if self.protocol == 2:
            return int(code) | (ALERT_BIT if raw else 0)
        return p1 | (hardware_flags_to_protocol1(HardwareErrorFlags(raw)) if raw else 0)

    def _refused(self, refused: WriteRefused) -> int:
        # Protocol 1.0 has one bit for both ranges: "Range Error: when an instruction is
        # out of the range for use" (e-manual, Protocol 1.0 status packet).
        if self.protocol == 2:
            return self.error_byte(_P2_FAULT[refused.fault])
        return self.error_byte(p1=int(Protocol1Error.RANGE))

    # ------------------------------------------------------------------ instructions

    def read(self, address: int, length: int, now: float) -> tuple[int, bytes]:
        """READ: ``(ERR, data)``; outside the table: access error / range bit, no data."""
        if self.memory.touches_indirect(address, length):
            self.refresh(now)  # Indirect Data reads its targets, wherever they are
        else:
            self.refresh(now, address, length)
        data = self.memory.read(address, length)
        if data is None:
            if self.protocol == 2:
                return self.error_byte(StatusErrorCode.ACCESS_ERROR), b""
            return self.error_byte(p1=int(Protocol1Error.RANGE)), b""
        return self.error_byte(), data

    def write(self, address: int, data: bytes, now: float) -> int:
        """WRITE: apply the data if every rule allows it; return the ERR byte."""
        checked = self._check_write(address, data)
        if isinstance(checked, WriteRefused):
            return self._refused(checked)
        self.memory.store(checked)
        written = (a for start, chunk in checked.chunks for a in range(start, start + len(chunk)))
        if self._config_addresses.isdisjoint(written):
            self._generation = self.memory.generation  # nothing cached changed
        else:
            self._load_config()
        p1 = 0
        for reg, value in checked:
            p1 |= self._apply(reg, value)
        return self.error_byte(p1=p1)

    def reg_write(self, address: int, data: bytes, now: float) -> int:
        """REG_WRITE: validate now, apply on ACTION."""
        checked = self._check_write(address, data)
        if isinstance(checked, WriteRefused):
            return self._refused(checked)
        self.pending_write = (address, bytes(data))
        self.memory.set_if_present(N.REGISTERED_INSTRUCTION, 1)
        return self.error_byte()

    def action(self, now: float) -> int:
        """ACTION: run the registered write; without one, the instruction error.

        Both protocols define the instruction error as "an undefined instruction, or
        Action without Reg Write" (e-manual, Protocol 1.0 and 2.0 status packets).
        """
        pending, self.pending_write = self.pending_write, None
        self.memory.set_if_present(N.REGISTERED_INSTRUCTION, 0)
        if pending is None:
            return self.error_byte(
                StatusErrorCode.INSTRUCTION_ERROR, int(Protocol1Error.INSTRUCTION)
            )
        return self.write(pending[0], pending[1], now)

    def reboot(self) -> None:
        """REBOOT (or power-up): RAM back to defaults, errors cleared, goal = present."""
        self.model.reboot([self.index])
        self.memory.reset(self.id, None, ram_only=True)
        self.watchdog_timeout, self.watchdog_tripped = 0.0, False  # Bus Watchdog is RAM, 0
        self._load_config()
        self.model.set_profile([self.index], velocity=0.0, acceleration=0.0)
        self.pending_write = None
        self._apply_eeprom()
        self._reset_goal()

    def eeprom_image(self) -> bytes:
        """The EEPROM area (saved at every write on these servos), other addresses zero."""
        return masked(self.memory.data, self._eeprom_spans)

    def restore_eeprom(self, image: bytes) -> None:
        """Power up with the writable EEPROM registers of ``image`` (an ``eeprom_image``)."""
        chunks = [
            (reg.address, bytes(image[reg.address : reg.end]))
            for reg in self.spec.registers()
            if reg.area is Area.EEPROM and reg.access is Access.RW and reg.end <= len(image)
        ]
        self.memory.store(CheckedWrite(chunks=chunks))
        self._load_config()
        self.reboot()

    def setting_addresses(self) -> tuple[range, range]:
        """The bytes of ID and of Baud Rate."""
        table = self.spec.table
        return tuple(range(table[n].address, table[n].end) for n in (N.ID, N.BAUD_RATE))  # type: ignore[return-value]

    def factory_fresh(self) -> None:
        """Straight from the box: every register at its factory value, ID 1, then power up."""
        self.factory_reset(keep_id=False, keep_baud=False)

    def factory_reset(self, keep_id: bool, keep_baud: bool) -> None:
        """FACTORY_RESET: every register back to its default (optionally keeping ID/baud)."""
        servo_id, baud = self.id, self.memory.get(N.BAUD_RATE)
        self.memory.reset(servo_id if keep_id else 1, baud if keep_baud else None, ram_only=False)
        self._load_config()
        self.reboot()

    # ------------------------------------------------------------------ bus watchdog

    def heard(self, now: float) -> None:
        """An instruction packet for this servo arrived at ``now``: its watchdog restarts."""
        self.heard_at = now

    def watchdog_deadline(self) -> float:
        """When the Bus Watchdog expires unless an instruction comes [s]; ``inf``: it cannot.

        The watchdog watches only while torque is on, and not once it has tripped.
        """
        if not self.watchdog_timeout or self.watchdog_tripped or not self._torque_on():
            return math.inf
        return self.heard_at + self.watchdog_timeout

    def trip_watchdog(self) -> None:
        """The Bus Watchdog expired: stop, Bus Watchdog := -1, goal registers read-only.

        The stop applies no profile (goal := present position, held with torque on);
        Goal Position reads the present position. Writing 0 to Bus Watchdog clears it.
        """
        self.watchdog_tripped = True
        self.memory.set(N.BUS_WATCHDOG, -1)
        self.model.stop(self.index)
        self._reset_goal()

    def _check_write(self, address: int, data: bytes) -> CheckedWrite | WriteRefused:
        if self.watchdog_tripped and self._watchdog_refuses(address, data):
            return _WATCHDOG_REFUSAL
        return self.memory.check_write(
            address, data, torque_on=self._torque_on(), eeprom_lock=self.protocol == 2
        )

    def _watchdog_refuses(self, address: int, data: bytes) -> bool:
        """A tripped watchdog refuses goal writes, and any Bus Watchdog value but 0.

        The e-manual makes the goals read-only (Data Range Error) and names writing 0 as
        the way to clear the trip; what a non-zero write does then is not documented,
        and here it is refused too (the register keeps reading -1).
        """
        if not self._goal_bytes.isdisjoint(range(address, address + len(data))):
            return True
        at = self._watchdog_address - address
        return 0 <= at < len(data) and data[at] != 0

    def _apply_watchdog(self, value: int) -> None:
        # 0: off, and clears a trip; 1..127: armed, in 20 ms units (a write while tripped
        # never gets here, see ``_watchdog_refuses``).
        self.watchdog_timeout = value * WATCHDOG_UNIT if value > 0 else 0.0
        self.watchdog_tripped = False

    # ------------------------------------------------------------------ model binding

    def _live_registers(self) -> list[tuple[Register, LiveSource]]:
        """The registers the firmware keeps up to date, each with its value source."""
        m, i, spec = self.model, self.index, self.spec
        stall = m.physics[i].stall_torque
        quantum = float(m.quantum[i])
        current_scale = m.physics[i].stall_current / stall  # [A per N·m]
        # Present PWM: PWM Limit's maximum is 100 % (e-manual, PWM Limit(36): 885 = 100 %)
        pwm_full_scale = spec.table[N.PWM_LIMIT].max if N.PWM_LIMIT in spec.table else 0

        def ticks(now: float) -> int:
            raw = round(float(m.position[i]) / quantum) + spec.center_tick
            return int(raw) + self._homing

        def current(now: float) -> int:
            amps = float(m.motor_torque[i]) * current_scale
            if self.protocol == 1:
                return 2048 + round(amps / MX1_CURRENT_UNIT)
            return round(amps / spec.effort_per_tick)

        def moving(now: float) -> int:
            return 1 if bool(m.moving[i]) else 0

        sources: dict[RegisterName, LiveSource] = {
            N.PRESENT_POSITION: ticks,
            N.PRESENT_VELOCITY: lambda now: round(float(m.velocity[i]) / self._velocity_unit),
            N.PRESENT_SPEED: lambda now: round(float(m.velocity[i]) / self._velocity_unit),
            N.PRESENT_CURRENT: current,
            N.PRESENT_LOAD: lambda now: round(1000.0 * float(m.motor_torque[i]) / stall),  # 0.1 %
            N.PRESENT_PWM: lambda now: round(pwm_full_scale * float(m.motor_torque[i]) / stall),
            N.HARDWARE_ERROR_STATUS: lambda now: self._error_status(),
            N.REALTIME_TICK: lambda now: int(now * 1000.0) % 32768,
            N.MOVING: moving,
            N.MOVING_STATUS: lambda now: 1 - moving(now),
            N.PRESENT_TEMPERATURE: lambda now: round(float(m.temperature[i])),
            N.PRESENT_INPUT_VOLTAGE: lambda now: round(float(m.voltage[i]) * 10.0),
            N.TORQUE_ENABLE: lambda now: 1 if m.torque_enabled[i] else 0,
            N.POSITION_TRAJECTORY: lambda now: (
                round(float(m.reference[i]) / quantum) + spec.center_tick + self._homing
            ),
            N.VELOCITY_TRAJECTORY: lambda now: round(
                float(m.reference_velocity[i]) / self._velocity_unit
            ),
        }
        table = spec.table
        return [(table[name], fn) for name, fn in sources.items() if name in table]

    def _torque_on(self) -> bool:
        return bool(self.model.torque_enabled[self.index])

    def _apply(self, reg: Register, value: int) -> int:
        """Apply one written register to the model; returns 1.0 error bits (angle limit)."""
        m, i, name = self.model, self.index, reg.name
        if name is N.TORQUE_ENABLE:
            m.set_torque([i], bool(value))
            self.memory.set(N.TORQUE_ENABLE, 1 if m.torque_enabled[i] else 0)
        elif name is N.GOAL_POSITION:
            return self._apply_goal(value)
        elif name is N.BUS_WATCHDOG:
            self._apply_watchdog(value)
        elif name is N.PROFILE_VELOCITY:
            m.set_profile([i], velocity=value * self._velocity_unit)
        elif name is N.PROFILE_ACCELERATION:
            m.set_profile([i], acceleration=value * ACCELERATION_UNIT)  # X series
        elif name is N.MOVING_SPEED:
            # 1.0 joint mode: 0 means "as fast as the motor can", else 0.111 rpm units.
            m.set_profile([i], velocity=(value & 0x3FF) * self._velocity_unit)
        elif name is N.GOAL_ACCELERATION:
            m.set_profile([i], acceleration=value * MX1_ACCELERATION_UNIT)
        elif name is N.OPERATING_MODE and self.protocol == 2:
            self._mode_changed()
        else:
            self._apply_eeprom()
        return 0

    def _mode_changed(self) -> None:
        """A write of Operating Mode resets the profile and the goal limits.

        Profile Velocity and Acceleration := 0, Goal PWM and Goal Current := their limits
        (e-manual, Operating Mode(11), first note).
        """
        mem = self.memory
        mem.set_if_present(N.PROFILE_VELOCITY, 0)
        mem.set_if_present(N.PROFILE_ACCELERATION, 0)
        mem.reset_goal_limits()
        self.model.set_profile([self.index], velocity=0.0, acceleration=0.0)
        self._apply_eeprom()

    def _apply_goal(self, value: int) -> int:
        self._check_config()
        (lower, upper), bits = self._limits, 0
        target = value - self._homing
        if self._angle_limits and not lower <= target <= upper:
            # 1.0: "When Goal Position is written out of the range from CW Angle Limit to
            # CCW Angle Limit", the Angle Limit bit; the servo keeps within its limits (the
            # XL-320, 2.0 with 1.0's limits, too, with no bit to say so). Other 2.0 models
            # refuse such a write with the Data Limit Error before it gets here.
            bits = int(Protocol1Error.ANGLE_LIMIT) if self.protocol == 1 else 0
            target = min(max(target, lower), upper)
        shaft = (target - self.spec.center_tick) * self._tick_unit
        self.model.set_goal_one(self.index, shaft)
        return bits

    def _position_limits(self) -> tuple[int, int]:
        low, high = self.spec.limit_registers
        return self.memory.get(low), self.memory.get(high)

    def _apply_eeprom(self) -> None:
        """Copy the limit and shutdown registers into the model."""
        m, i, mem = self.model, self.index, self.memory
        if mem.has(N.TEMPERATURE_LIMIT):
            m.temperature_limit[i] = float(mem.get(N.TEMPERATURE_LIMIT))
        low, high = m.voltage_limits
        if mem.has(N.MIN_VOLTAGE_LIMIT):
            low[i] = mem.get(N.MIN_VOLTAGE_LIMIT) / 10.0
        if mem.has(N.MAX_VOLTAGE_LIMIT):
            high[i] = mem.get(N.MAX_VOLTAGE_LIMIT) / 10.0
        if mem.has(N.SHUTDOWN):
            shutdown = mem.get(N.SHUTDOWN)
            if self.protocol == 1:
                shutdown = int(hardware_flags_from_protocol1(shutdown))
            elif self.spec.error_bits is not None:  # the XL-320's own bits
                shutdown = int(self.spec.hardware_errors(shutdown))
            m.shutdown_mask[i] = shutdown
        self._apply_current_cap()
        m.invalidate()

    def _error_status(self) -> int:
        """Hardware Error Status: the latched errors in the model's own bits."""
        raw = int(self.model.hardware_error[self.index])
        bits = self.spec.error_bits
        if bits is None:
            return raw
        return sum(bit for bit, flag in bits.items() if raw & int(flag))

    def _apply_current_cap(self) -> None:
        """In current-based position control (mode 5) Goal Current caps the motor torque.

        Goal Current is itself bounded by Current Limit (e-manual, Operating Mode(11) and
        Goal Current(102)); other modes run at the motor's stall torque.
        """
        mem, m, i = self.memory, self.model, self.index
        if self.protocol != 2 or not (mem.has(N.OPERATING_MODE) and mem.has(N.GOAL_CURRENT)):
            return
        if mem.get(N.OPERATING_MODE) != OperatingMode.CURRENT_BASED_POSITION:
            m.set_torque_limit(i, None)
            return
        ticks = abs(mem.get(N.GOAL_CURRENT))
        if mem.has(N.CURRENT_LIMIT):
            ticks = min(ticks, mem.get(N.CURRENT_LIMIT))
        physics = m.physics[i]
        amps = ticks * self.spec.effort_per_tick
        m.set_torque_limit(i, amps * physics.stall_torque / physics.stall_current)

    def _reset_goal(self) -> None:
        """Goal Position := Present Position, as the firmware does at power-up."""
        ticks = int(self.model.present_ticks[self.index]) + self.spec.center_tick
        self.memory.set_if_present(N.GOAL_POSITION, ticks + self._homing)


def _addresses(spec: ModelSpec, names: tuple[RegisterName, ...]) -> frozenset[int]:
    """Every byte address of the registers ``names`` the model has."""
    table = spec.table
    return frozenset(
        a for name in names if name in table for a in range(table[name].address, table[name].end)
    )


# ------------------------------------------------------------------ feetech_servo
# The firmware of one simulated Feetech servo: its memory bound to the dynamics model.
F = FeetechRegister
FEETECH_ACCELERATION_UNIT = 100.0  # [step/s²] per Acceleration unit (STS memory table, address 41)
CURRENT_UNIT = 0.0065  # [A] per Present Current unit (6.5 mA)
#: Registers whose values the firmware caches (ID, rate, delays, offset, limits).
_FEETECH_CONFIG = frozenset(
    {
        F.ID,
        F.BAUD_RATE,
        F.RETURN_DELAY_TIME,
        F.RESPONSE_STATUS_LEVEL,
        F.HOMING_OFFSET,
        F.MIN_ANGLE_LIMIT,
        F.MAX_ANGLE_LIMIT,
        F.OPERATING_MODE,
    }
)
_EEPROM_LIMITS = frozenset(
    {F.MAX_TEMPERATURE_LIMIT, F.MAX_INPUT_VOLTAGE, F.MIN_INPUT_VOLTAGE, F.UNLOADING_CONDITION}
)


class FeetechServo(ServoFirmware[FeetechModel, registers.Register]):
    """One simulated Feetech servo.

    Built with :class:`~hilbot.sim.servo_firmware.ServoFirmware`'s arguments (``spec``
    a Feetech model); ``return_delay_time`` ``None`` keeps the table's default (0).
    """

    #: Response Status Level: 0 answers only PING and READ, 1 every instruction.
    settings = SettingNames(F.ID, F.BAUD_RATE, F.RETURN_DELAY_TIME, F.RESPONSE_STATUS_LEVEL)
    return_delay_unit = FEETECH_RETURN_DELAY_UNIT
    memory: FeetechMemory

    def _new_memory(self, servo_id: int, baud_value: int | None) -> FeetechMemory:
        return FeetechMemory(self.spec, servo_id, baud_value)

    def _power_up_return_delay(self, value: int) -> None:
        self.memory.set(F.RETURN_DELAY_TIME, value)
        self.memory.save(F.RETURN_DELAY_TIME)  # saved: a power cycle restores saved EEPROM

    def _set_up(self) -> None:
        self._quantum = self.spec.radians_per_tick  # [rad/tick]
        regs = self.spec.table.values()
        self._eeprom_spans = eeprom_spans(r for r in regs if r.area is Area.EEPROM)

    # ------------------------------------------------------------------ settings

    def _load_own_config(self) -> None:
        """Cache Homing Offset, the angle limits and the operating mode."""
        mem = self.memory
        self._offset = mem.get(F.HOMING_OFFSET) if F.HOMING_OFFSET in self.spec.table else 0
        self._limits = (mem.get(F.MIN_ANGLE_LIMIT), mem.get(F.MAX_ANGLE_LIMIT))
        self._mode = mem.get(F.OPERATING_MODE) if F.OPERATING_MODE in self.spec.table else 0

    def error_byte(self) -> int:
        """ERROR byte of a status packet: the latched errors this series reports."""
        raw = int(self.model.hardware_error[self.index])
        if not raw:
            return 0
        return int(status_error(HardwareErrorFlags(raw)) & self.spec.status_bits)

    # ------------------------------------------------------------------ instructions

    def read(self, address: int, length: int, now: float) -> tuple[int, bytes]:
        """READ: ``(ERROR, data)``."""
        self.refresh(now, address, length)
        return self.error_byte(), self.memory.read(address, length)

    def write(self, address: int, data: bytes, now: float) -> int:
        """WRITE: apply the data under the firmware's rules; return the ERROR byte."""
        written = self.memory.write(address, data)
        if any(w.register.name in _FEETECH_CONFIG for w in written):
            self._load_config()
        for item in written:
            self._apply(item)
        return self.error_byte()

    def reg_write(self, address: int, data: bytes, now: float) -> int:
        """REG WRITE: hold the write until ACTION; the Async Write Flag reads 1."""
        self.pending_write = (address, bytes(data))
        self.memory.set(F.ASYNC_WRITE_FLAG, 1)
        return self.error_byte()

    def action(self, now: float) -> int:
        """ACTION: run the registered write (nothing without one)."""
        pending, self.pending_write = self.pending_write, None
        self.memory.set(F.ASYNC_WRITE_FLAG, 0)
        if pending is None:
            return self.error_byte()
        return self.write(pending[0], pending[1], now)

    def reboot(self) -> None:
        """Restart (REBOOT or power-up): saved EEPROM, RAM defaults, errors cleared."""
        self.model.reboot([self.index])
        self.memory.power_up()
        self.pending_write = None
        self._load_config()
        self.model.set_profile([self.index], velocity=0.0, acceleration=0.0)
        self._apply_eeprom()
        self._reset_goal()

    def eeprom_image(self) -> bytes:
        """The saved EEPROM (what survives power-off), other addresses zero."""
        return masked(self.memory.saved, self._eeprom_spans)

    def restore_eeprom(self, image: bytes) -> None:
        """Power up with ``image`` (an ``eeprom_image``) as the saved EEPROM."""
        for reg in self.spec.table.values():
            if reg.area is Area.EEPROM and reg.access is Access.RW and reg.end <= len(image):
                self.memory.saved[reg.address : reg.end] = image[reg.address : reg.end]
        self.reboot()

    def setting_addresses(self) -> tuple[range, range]:
        """The bytes of ID and of Baud Rate."""
        table = self.spec.table
        return tuple(range(table[n].address, table[n].end) for n in (F.ID, F.BAUD_RATE))  # type: ignore[return-value]

    def factory_fresh(self) -> None:
        """Straight from the box: every register at its factory value, ID 1, then power up."""
        self.memory.factory_reset(1)
        self.reboot()

    def factory_reset(self) -> None:
        """Factory values in every register but ID (the servo stays reachable), then restart."""
        self.memory.factory_reset(self.id)
        self.reboot()

    def heard(self, now: float) -> None:
        """An instruction for this servo arrived (Feetech servos have no bus watchdog)."""

    # ------------------------------------------------------------------ model binding

    def raw_position(self) -> int:
        """The encoder's position [step], before Homing Offset."""
        return round(float(self.model.position[self.index]) / self._quantum) + self.spec.center_tick

    def _live_registers(self) -> list[tuple[registers.Register, LiveSource]]:
        m, i = self.model, self.index
        stall = m.physics[i].stall_torque
        current_scale = m.physics[i].stall_current / stall  # [A per N·m]
        sources: dict[FeetechRegister, LiveSource] = {
            F.PRESENT_POSITION: lambda now: self.raw_position() - self._offset,
            F.PRESENT_SPEED: lambda now: round(float(m.velocity[i]) / self._quantum),
            F.PRESENT_LOAD: lambda now: round(TORQUE_FULL_SCALE * float(m.motor_torque[i]) / stall),
            F.PRESENT_VOLTAGE: lambda now: round(float(m.voltage[i]) * 10.0),
            F.PRESENT_TEMPERATURE: lambda now: round(float(m.temperature[i])),
            F.STATUS: lambda now: self.error_byte(),
            F.MOVING: lambda now: 1 if bool(m.moving[i]) else 0,
            F.TORQUE_ENABLE: lambda now: 1 if m.torque_enabled[i] else 0,
            F.PRESENT_CURRENT: lambda now: round(
                abs(float(m.motor_torque[i])) * current_scale / CURRENT_UNIT
            ),
        }
        table = self.spec.table
        return [(table[name], fn) for name, fn in sources.items() if name in table]

    def _apply(self, item: Written) -> None:
        m, i, name, value = self.model, self.index, item.register.name, item.value
        if name is F.TORQUE_ENABLE:
            self._apply_torque(value)
        elif name is F.GOAL_POSITION:
            self._apply_goal(value)
        elif name is F.GOAL_SPEED:
            m.set_profile([i], velocity=abs(value) * self._quantum)
        elif name is F.ACCELERATION:
            m.set_profile([i], acceleration=value * FEETECH_ACCELERATION_UNIT * self._quantum)
        elif name is F.TORQUE_LIMIT:
            self._apply_torque_limit()
        elif name in _EEPROM_LIMITS:
            self._apply_eeprom()

    def _apply_torque(self, value: int) -> None:
        m, i = self.model, self.index
        if value == TORQUE_CALIBRATE:
            # "Write 128: current position correction is 2048" (memory table, 40).
            offset = self.raw_position() - self.spec.center_tick
            limit = self.spec.table[F.HOMING_OFFSET].max
            self.memory.set(F.HOMING_OFFSET, max(-limit, min(limit, offset)))
            self.memory.save(F.HOMING_OFFSET)
            self._load_config()
            self.memory.set(F.TORQUE_ENABLE, 1 if m.torque_enabled[i] else 0)
            self._reset_goal()
            return
        m.set_torque([i], value == 1)
        self.memory.set(F.TORQUE_ENABLE, 1 if m.torque_enabled[i] else 0)

    def _apply_goal(self, value: int) -> None:
        self._check_config()
        low, high = self._limits
        goal = value
        if self._mode == POSITION_MODE and (low or high):
            goal = min(max(value, low), high)
            if goal != value:
                self.memory.set(F.GOAL_POSITION, goal)
        shaft = (goal + self._offset - self.spec.center_tick) * self._quantum
        self.model.set_goal_one(self.index, shaft)

    def _apply_eeprom(self) -> None:
        """Copy the temperature, voltage and unloading settings into the model."""
        m, i, mem = self.model, self.index, self.memory
        m.temperature_limit[i] = float(mem.get(F.MAX_TEMPERATURE_LIMIT))
        low, high = m.voltage_limits
        low[i] = mem.get(F.MIN_INPUT_VOLTAGE) / 10.0
        high[i] = mem.get(F.MAX_INPUT_VOLTAGE) / 10.0
        m.shutdown_mask[i] = int(hardware_flags(mem.get(F.UNLOADING_CONDITION)))
        self._apply_torque_limit()  # power-up loaded it from Max Torque
        m.invalidate()

    def _apply_torque_limit(self) -> None:
        """Cap the model's torque at Torque Limit's share of the stall torque (STS only)."""
        m, i = self.model, self.index
        if F.TORQUE_LIMIT not in self.spec.table:
            m.set_torque_limit(i, None)
            return
        share = self.memory.get(F.TORQUE_LIMIT) / TORQUE_FULL_SCALE
        m.set_torque_limit(i, share * m.physics[i].stall_torque)

    def _reset_goal(self) -> None:
        """Goal Position := Present Position, as at power-up."""
        self.memory.set(F.GOAL_POSITION, self.raw_position() - self._offset)
