"""One servo on the virtual bus: its control-table memory bound to the dynamics model.

``VirtualServo`` is what the firmware of one servo does with its memory: refresh the
present-value registers from the dynamics model before a read, apply written goal,
torque and profile registers to the model, reboot and factory reset, and build the
ERR byte of its status packets (Protocol 2.0 error codes with the alert bit, or
Protocol 1.0 error bits with the hardware bits of every status packet).
"""

from __future__ import annotations

import math

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
from hilbot.sim.control_table_memory import (
    CheckedWrite,
    ControlTableMemory,
    WriteFault,
    WriteRefused,
)
from hilbot.sim.servo_firmware import (
    LiveSource,
    ServoFirmware,
    SettingNames,
    eeprom_spans,
    masked,
)

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
