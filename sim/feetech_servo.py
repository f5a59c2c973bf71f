"""The firmware of one simulated Feetech servo: its memory bound to the dynamics model.

``FeetechServo`` refreshes the present-value registers from the model before a read,
applies written goal, torque, speed and acceleration registers to the model, and
builds the ERROR byte of its status packets from the latched hardware errors
(``StatusError`` bits, only those its series has).

Firmware behaviour modelled (memory tables; docs/simulation.md says what is chosen):

- Goal Position beyond Min/Max Angle Limit is clamped to them in position mode, not
  refused; with both limits 0 (multi-turn) it is not limited; the register keeps the
  clamped value;
- Present Position = raw position - Homing Offset, so Goal Position is raw goal -
  Homing Offset (LeRobot: "Present_Position = Actual_Position - Homing_Offset");
- Torque Enable 128 makes the present position read 2048 by setting Homing Offset
  (saved to EEPROM); 2 (damping) is modelled as torque off;
- Goal Speed 0 and Acceleration 0 mean "as fast as the motor can";
- Torque Limit (STS, RAM 48; loaded from Max Torque at power-up) caps the motor's torque
  at its share of the stall torque (1000 = 100 %): Present Load, the output's share of
  full scale, saturates there, and a goal beyond an obstacle (``ServoModel.set_obstacle``)
  or a hand holding the joint away from its goal stalls at that load. The cap is on the
  torque only: a duty-cycle limit would also lower the top speed, which is not modelled;
- Unloading Condition bits turn torque off on the matching errors; errors stay
  latched until a reboot or power-up;
- REG WRITE sets the Async Write Flag until ACTION.
"""

from __future__ import annotations

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.feetech.protocol import hardware_flags, status_error
from hilbot.hal.feetech.tables import (
    POSITION_MODE,
    RETURN_DELAY_UNIT,
    TORQUE_CALIBRATE,
    TORQUE_FULL_SCALE,
    FeetechModel,
    FeetechRegister,
)
from hilbot.hal.registers import Access, Area, Register
from hilbot.sim.feetech_memory import FeetechMemory, Written
from hilbot.sim.servo_firmware import (
    LiveSource,
    ServoFirmware,
    SettingNames,
    eeprom_spans,
    masked,
)

N = FeetechRegister
ACCELERATION_UNIT = 100.0  # [step/s²] per Acceleration unit (STS memory table, address 41)
CURRENT_UNIT = 0.0065  # [A] per Present Current unit (6.5 mA)
#: Registers whose values the firmware caches (ID, rate, delays, offset, limits).
_CONFIG = frozenset(
    {
        N.ID,
        N.BAUD_RATE,
        N.RETURN_DELAY_TIME,
        N.RESPONSE_STATUS_LEVEL,
        N.HOMING_OFFSET,
        N.MIN_ANGLE_LIMIT,
        N.MAX_ANGLE_LIMIT,
        N.OPERATING_MODE,
    }
)
_EEPROM_LIMITS = frozenset(
    {N.MAX_TEMPERATURE_LIMIT, N.MAX_INPUT_VOLTAGE, N.MIN_INPUT_VOLTAGE, N.UNLOADING_CONDITION}
)


class FeetechServo(ServoFirmware[FeetechModel, Register]):
    """One simulated Feetech servo.

    Built with :class:`~hilbot.sim.servo_firmware.ServoFirmware`'s arguments (``spec``
    a Feetech model); ``return_delay_time`` ``None`` keeps the table's default (0).
    """

    #: Response Status Level: 0 answers only PING and READ, 1 every instruction.
    settings = SettingNames(N.ID, N.BAUD_RATE, N.RETURN_DELAY_TIME, N.RESPONSE_STATUS_LEVEL)
    return_delay_unit = RETURN_DELAY_UNIT
    memory: FeetechMemory

    def _new_memory(self, servo_id: int, baud_value: int | None) -> FeetechMemory:
        return FeetechMemory(self.spec, servo_id, baud_value)

    def _power_up_return_delay(self, value: int) -> None:
        self.memory.set(N.RETURN_DELAY_TIME, value)
        self.memory.save(N.RETURN_DELAY_TIME)  # saved: a power cycle restores saved EEPROM

    def _set_up(self) -> None:
        self._quantum = self.spec.radians_per_tick  # [rad/tick]
        regs = self.spec.table.values()
        self._eeprom_spans = eeprom_spans(r for r in regs if r.area is Area.EEPROM)

    # ------------------------------------------------------------------ settings

    def _load_own_config(self) -> None:
        """Cache Homing Offset, the angle limits and the operating mode."""
        mem = self.memory
        self._offset = mem.get(N.HOMING_OFFSET) if N.HOMING_OFFSET in self.spec.table else 0
        self._limits = (mem.get(N.MIN_ANGLE_LIMIT), mem.get(N.MAX_ANGLE_LIMIT))
        self._mode = mem.get(N.OPERATING_MODE) if N.OPERATING_MODE in self.spec.table else 0

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
        if any(w.register.name in _CONFIG for w in written):
            self._load_config()
        for item in written:
            self._apply(item)
        return self.error_byte()

    def reg_write(self, address: int, data: bytes, now: float) -> int:
        """REG WRITE: hold the write until ACTION; the Async Write Flag reads 1."""
        self.pending_write = (address, bytes(data))
        self.memory.set(N.ASYNC_WRITE_FLAG, 1)
        return self.error_byte()

    def action(self, now: float) -> int:
        """ACTION: run the registered write (nothing without one)."""
        pending, self.pending_write = self.pending_write, None
        self.memory.set(N.ASYNC_WRITE_FLAG, 0)
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
        return tuple(range(table[n].address, table[n].end) for n in (N.ID, N.BAUD_RATE))  # type: ignore[return-value]

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

    def _live_registers(self) -> list[tuple[Register, LiveSource]]:
        m, i = self.model, self.index
        stall = m.physics[i].stall_torque
        current_scale = m.physics[i].stall_current / stall  # [A per N·m]
        sources: dict[FeetechRegister, LiveSource] = {
            N.PRESENT_POSITION: lambda now: self.raw_position() - self._offset,
            N.PRESENT_SPEED: lambda now: round(float(m.velocity[i]) / self._quantum),
            N.PRESENT_LOAD: lambda now: round(TORQUE_FULL_SCALE * float(m.motor_torque[i]) / stall),
            N.PRESENT_VOLTAGE: lambda now: round(float(m.voltage[i]) * 10.0),
            N.PRESENT_TEMPERATURE: lambda now: round(float(m.temperature[i])),
            N.STATUS: lambda now: self.error_byte(),
            N.MOVING: lambda now: 1 if bool(m.moving[i]) else 0,
            N.TORQUE_ENABLE: lambda now: 1 if m.torque_enabled[i] else 0,
            N.PRESENT_CURRENT: lambda now: round(
                abs(float(m.motor_torque[i])) * current_scale / CURRENT_UNIT
            ),
        }
        table = self.spec.table
        return [(table[name], fn) for name, fn in sources.items() if name in table]

    def _apply(self, item: Written) -> None:
        m, i, name, value = self.model, self.index, item.register.name, item.value
        if name is N.TORQUE_ENABLE:
            self._apply_torque(value)
        elif name is N.GOAL_POSITION:
            self._apply_goal(value)
        elif name is N.GOAL_SPEED:
            m.set_profile([i], velocity=abs(value) * self._quantum)
        elif name is N.ACCELERATION:
            m.set_profile([i], acceleration=value * ACCELERATION_UNIT * self._quantum)
        elif name is N.TORQUE_LIMIT:
            self._apply_torque_limit()
        elif name in _EEPROM_LIMITS:
            self._apply_eeprom()

    def _apply_torque(self, value: int) -> None:
        m, i = self.model, self.index
        if value == TORQUE_CALIBRATE:
            # "Write 128: current position correction is 2048" (memory table, 40).
            offset = self.raw_position() - self.spec.center_tick
            limit = self.spec.table[N.HOMING_OFFSET].max
            self.memory.set(N.HOMING_OFFSET, max(-limit, min(limit, offset)))
            self.memory.save(N.HOMING_OFFSET)
            self._load_config()
            self.memory.set(N.TORQUE_ENABLE, 1 if m.torque_enabled[i] else 0)
            self._reset_goal()
            return
        m.set_torque([i], value == 1)
        self.memory.set(N.TORQUE_ENABLE, 1 if m.torque_enabled[i] else 0)

    def _apply_goal(self, value: int) -> None:
        self._check_config()
        low, high = self._limits
        goal = value
        if self._mode == POSITION_MODE and (low or high):
            goal = min(max(value, low), high)
            if goal != value:
                self.memory.set(N.GOAL_POSITION, goal)
        shaft = (goal + self._offset - self.spec.center_tick) * self._quantum
        self.model.set_goal_one(self.index, shaft)

    def _apply_eeprom(self) -> None:
        """Copy the temperature, voltage and unloading settings into the model."""
        m, i, mem = self.model, self.index, self.memory
        m.temperature_limit[i] = float(mem.get(N.MAX_TEMPERATURE_LIMIT))
        low, high = m.voltage_limits
        low[i] = mem.get(N.MIN_INPUT_VOLTAGE) / 10.0
        high[i] = mem.get(N.MAX_INPUT_VOLTAGE) / 10.0
        m.shutdown_mask[i] = int(hardware_flags(mem.get(N.UNLOADING_CONDITION)))
        self._apply_torque_limit()  # power-up loaded it from Max Torque
        m.invalidate()

    def _apply_torque_limit(self) -> None:
        """Cap the model's torque at Torque Limit's share of the stall torque (STS only)."""
        m, i = self.model, self.index
        if N.TORQUE_LIMIT not in self.spec.table:
            m.set_torque_limit(i, None)
            return
        share = self.memory.get(N.TORQUE_LIMIT) / TORQUE_FULL_SCALE
        m.set_torque_limit(i, share * m.physics[i].stall_torque)

    def _reset_goal(self) -> None:
        """Goal Position := Present Position, as at power-up."""
        self.memory.set(N.GOAL_POSITION, self.raw_position() - self._offset)
