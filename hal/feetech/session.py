"""What the Feetech backend does on its bus thread: start-up checks, the cycle, torque, close.

Plain synchronous code over :class:`~hilbot.hal.feetech.bus.FeetechBus`; the backend
runs each method as one job on its thread.

Start-up (:meth:`FeetechSession.open`) pings every servo, reads its model number,
firmware, operating mode, return delay and position limit registers, and refuses
(:class:`~hilbot.hal.errors.StartupError`) a missing servo, a wrong model, a servo not
in position mode, or joint limits beyond its Min/Max Position Limit. It writes each
configured ``torque_limit`` to Torque Limit (RAM, so no Lock to open; the firmware loads
it from Max Torque at power-up) and reads it back, again after a reboot. Then it copies
Present Position into Goal Position so that enabling torque holds where it is.

The cycle reads one block per servo: Present Position, Speed, Load, Voltage and
Temperature (addresses 56 ~ 63 on every supported model) with one SYNC READ on the
STS series and one READ per servo on the SCS series, which has no sync read. The ERROR
byte of each reply is the servo's status (voltage, angle sensor, overheat, current,
overload), decoded into :class:`~hilbot.hal.backend.HardwareErrorFlags`.
"""

from __future__ import annotations

import logging
import math
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hilbot.hal.backend import EffortUnit, HardwareErrorFlags, JointState
from hilbot.hal.errors import (
    CommError,
    CommTimeout,
    ConfigError,
    HardwareFault,
    ServoLimitError,
    StartupError,
    StartupProblem,
    TorqueNotConfirmed,
)
from hilbot.hal.family import FAMILIES
from hilbot.hal.feetech import protocol
from hilbot.hal.feetech.bus import FeetechBus
from hilbot.hal.feetech.tables import (
    POSITION_MODE,  # STS only: SCS servos have no mode
    RETURN_DELAY_UNIT,
    TORQUE_FULL_SCALE,
    FeetechUnits,
    state_block,
)
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.hal.mapping import ServoSpec
from hilbot.hal.registers import Encoding, Register

#: The common hardware-error flags of every ERROR byte, looked up once per reply.
_FLAGS = tuple(protocol.hardware_flags(error) for error in range(256))
_SIGN_BITS = {
    Encoding.SIGN_MAGNITUDE_10: 10,
    Encoding.SIGN_MAGNITUDE_11: 11,
    Encoding.SIGN_MAGNITUDE_15: 15,
}


def _block_format(regs: Sequence[Register]) -> tuple[struct.Struct, tuple[int, ...]]:
    """A ``struct`` that unpacks the state block in one call, and each field's sign bit."""
    order = "<" if regs[0].byte_order == "little" else ">"
    codes = {1: "B", 2: "H", 4: "I"}
    signs = []
    for reg in regs:
        if reg.encoding is Encoding.SIGNED:
            raise ValueError(f"{reg.label}: two's complement is not a Feetech encoding")
        signs.append(_SIGN_BITS.get(reg.encoding, 0))
    return struct.Struct(order + "".join(codes[r.size] for r in regs)), tuple(signs)


def _signed(raw: int, bit: int) -> int:
    if not bit:
        return raw
    magnitude = raw & ((1 << bit) - 1)
    return -magnitude if raw >> bit & 1 else magnitude


#: ``ServoSpec`` settings of Dynamixel start-up that Feetech servos have no register for.
DYNAMIXEL_ONLY = FAMILIES["dynamixel"].own_settings
#: ``ServoSpec`` settings of Feetech start-up that the Dynamixel start-up does not write.
FEETECH_ONLY = FAMILIES["feetech"].own_settings


def check_settings(spec: ServoSpec) -> None:
    """Refuse the Dynamixel-only settings on a Feetech servo, rather than ignore them.

    Raises:
        ConfigError: naming the servo and the setting.
    """
    given = FAMILIES["dynamixel"].settings_given(spec)
    if given:
        raise ConfigError(
            f"servo {spec.id} ({spec.model}): {given[0]} is a Dynamixel setting; Feetech "
            "servos run in position mode, their torque capped with torque_limit (drop it)",
            servo_id=spec.id,
            field=given[0],
        )


def torque_limit_value(unit: FeetechUnits) -> int | None:
    """The Torque Limit register value of the servo's ``torque_limit`` (``None``: none).

    Raises:
        ConfigError: the model has no Torque Limit (the SCS series), or the limit is
            below one step (0.1 %) and would leave no torque.
    """
    spec, model = unit.spec, unit.model
    if spec.torque_limit is None:
        return None
    if N.TORQUE_LIMIT not in model.table:
        raise ConfigError(
            f"servo {spec.id} ({spec.model}): torque_limit needs a Torque Limit register, "
            f"which the {model.series.value} series lacks (drop it)",
            servo_id=spec.id,
            field="torque_limit",
        )
    value = round(spec.torque_limit * TORQUE_FULL_SCALE)
    if value < 1:
        raise ConfigError(
            f"servo {spec.id} ({spec.model}): torque_limit {spec.torque_limit:g} is below "
            f"Torque Limit's step of {1 / TORQUE_FULL_SCALE:g} and would leave no torque",
            servo_id=spec.id,
            field="torque_limit",
        )
    return value


@dataclass(frozen=True, slots=True)
class ServoInfo:
    """What start-up found on one servo."""

    servo_id: int
    joint: str
    model: str
    model_number: int
    firmware: tuple[int, int]
    return_delay: float  # [s]
    position_limits: tuple[int, int]  # [ticks] Min/Max Position Limit


class FeetechSession:
    """The bus-thread side of one Feetech bus.

    Args:
        bus: the bus, not yet open.
        servos: every servo on it (shadows included).
        joint_limits: joint limits the safety layer enforces; start-up checks that each
            servo's Min/Max Position Limit allows them.
        clock: timestamp source of the states.
        log: logger.
    """

    def __init__(
        self,
        bus: FeetechBus,
        servos: Sequence[ServoSpec],
        *,
        joint_limits: Mapping[str, tuple[float, float]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        self.bus = bus
        for spec in servos:
            check_settings(spec)
        self.units = tuple(FeetechUnits.of(s) for s in servos)
        self.joint_limits = dict(joint_limits or {})
        self.clock = clock
        self.log = log or logging.getLogger(__name__)
        self.names = tuple(u.spec.joint for u in self.units if u.spec.shadow_of is None)
        self.ids = tuple(u.spec.id for u in self.units)
        self._primary = [u.spec.shadow_of is None for u in self.units]
        self.sync_read = all(u.model.has_sync_read for u in self.units)
        blocks = {state_block(u.model)[:2] for u in self.units}
        if len(blocks) != 1:
            raise ValueError(f"servos with different state blocks on one bus: {sorted(blocks)}")
        self._read_address, self._read_length = blocks.pop()
        self._formats = tuple(_block_format(state_block(u.model)[2]) for u in self.units)
        primaries = [u for u in self.units if u.spec.shadow_of is None]
        self._offset = np.array([u.spec.offset for u in primaries])
        self._center = np.array([float(u.model.center_tick) for u in primaries])
        self._scale = np.array([u.scale for u in primaries])
        self._load_scale = np.array([u.spec.direction * 0.1 for u in primaries])  # [%] per unit
        self._slot = [
            self.names.index(u.spec.joint) for u in self.units
        ]  # JointState index of each servo (a shadow shares its primary's)
        self._goal_plans: dict[str, list[FeetechUnits]] = {}
        for unit in self.units:
            self._goal_plans.setdefault(unit.spec.joint, []).append(unit)
        goal = self.units[0].model.register(N.GOAL_POSITION)
        self._goal_address, self._goal_size = goal.address, goal.size
        self._torque_limits = {
            u.spec.id: (u, value)
            for u in self.units
            if (value := torque_limit_value(u)) is not None
        }  # servo id -> (its units, the Torque Limit to write)
        self.infos: tuple[ServoInfo, ...] = ()
        self.errors: dict[int, int] = {}  # servo id -> last ERROR byte seen

    # --- start-up -----------------------------------------------------------------------

    def open(self) -> None:
        """Open the port and run the start-up checks (``StartupError`` on a problem)."""
        self.bus.open()
        try:
            self.infos = tuple(self._check(u) for u in self.units)
            self.bus.return_delay = max(i.return_delay for i in self.infos)
            self._write_torque_limits(self.ids)
            for unit in self.units:
                self._goal_from_present(unit)
        except BaseException:
            self.bus.close()
            raise

    def _check(self, unit: FeetechUnits) -> ServoInfo:
        spec, model = unit.spec, unit.model
        try:
            self.bus.ping(spec.id)
        except CommError:
            raise StartupError(
                f"servo {spec.id} ({spec.joint!r}, {spec.model}) does not answer a ping on "
                f"{self.bus.port.name} at {self.bus.baudrate} bit/s; check power, wiring, "
                "its id and baud rate (hilbot scan --family feetech)",
                servo_id=spec.id,
                problem=StartupProblem.MISSING,
                expected=spec.model,
            ) from None
        number = self._read(unit, N.MODEL_NUMBER)
        if number != model.model_number:
            raise StartupError(
                f"servo {spec.id} ({spec.joint!r}) is model number {number}, the config says "
                f"{spec.model} ({model.model_number})",
                servo_id=spec.id,
                problem=StartupProblem.WRONG_MODEL,
                expected=model.model_number,
                found=number,
            )
        firmware = (
            self._read(unit, N.FIRMWARE_MAJOR_VERSION),
            self._read(unit, N.FIRMWARE_MINOR_VERSION),
        )
        if N.OPERATING_MODE in model.table:
            mode = self._read(unit, N.OPERATING_MODE)
            if mode != POSITION_MODE:
                raise StartupError(
                    f"servo {spec.id} ({spec.joint!r}) is in operating mode {mode}, not "
                    f"position mode ({POSITION_MODE}); set Operating Mode (33) to 0 with "
                    "Feetech's FD tool",
                    servo_id=spec.id,
                    problem=StartupProblem.WRONG_MODE,
                    expected=POSITION_MODE,
                    found=mode,
                )
        delay = self._read(unit, N.RETURN_DELAY_TIME) * RETURN_DELAY_UNIT
        limits = (self._read(unit, N.MIN_ANGLE_LIMIT), self._read(unit, N.MAX_ANGLE_LIMIT))
        self._check_limits(unit, limits)
        return ServoInfo(spec.id, spec.joint, model.name, number, firmware, delay, limits)

    def _check_limits(self, unit: FeetechUnits, limits: tuple[int, int]) -> None:
        spec = unit.spec
        wanted = self.joint_limits.get(spec.joint)
        if wanted is None or limits == (0, 0):  # 0 ~ 0: no limits (multi-turn), as the manual
            return
        ends = sorted(unit.exact_ticks(v) for v in wanted)
        low, high = max(0, math.floor(ends[0])), min(unit.model.position_max, math.ceil(ends[1]))
        command = (
            f"hilbot servo --family feetech --port {self.bus.port.name} --id {spec.id} "
            f"--min-angle-limit {min(low, limits[0])} --max-angle-limit {max(high, limits[1])}"
        )
        for register, found, need, beyond in (
            (N.MIN_ANGLE_LIMIT, limits[0], low, ends[0] < limits[0] - 0.5),
            (N.MAX_ANGLE_LIMIT, limits[1], high, ends[1] > limits[1] + 0.5),
        ):
            if beyond:
                reg = unit.model.register(register)
                raise ServoLimitError(
                    f"servo {spec.id} ({spec.joint!r}): the joint limits need {reg.label} "
                    f"{need}, the servo has {found} (the firmware would clamp goals there); "
                    f"set it with `{command}`, or narrow the joint with safety.soft_limits",
                    servo_id=spec.id,
                    register=reg.label,
                    address=reg.address,
                    expected=need,
                    found=found,
                    command=command,
                )

    def _write_torque_limits(self, ids: Sequence[int]) -> None:
        """Write the configured Torque Limit of ``ids`` and read it back.

        Torque Limit is RAM: the write needs no Lock opened and takes effect at once, with
        torque on or off, and a power-up or reboot replaces it with Max Torque (EEPROM 16).

        Raises:
            StartupError: a servo reads back another value than the one written.
        """
        for servo_id in ids:
            if servo_id not in self._torque_limits:
                continue
            unit, value = self._torque_limits[servo_id]
            reg = unit.model.register(N.TORQUE_LIMIT)
            self.bus.write(servo_id, reg.address, reg.encode(value))
            back = self._read(unit, N.TORQUE_LIMIT)
            if back != value:
                raise self._not_taken(unit, reg, value, back)
            self.log.info(
                "servo %d: Torque Limit %d (%.1f %% of max torque) written and read back",
                servo_id,
                value,
                100.0 * value / TORQUE_FULL_SCALE,
            )

    def _not_taken(self, unit: FeetechUnits, reg: Register, value: int, back: int) -> StartupError:
        spec, ceiling = unit.spec, unit.model.register(N.MAX_TORQUE)
        return StartupError(
            f"servo {spec.id} ({spec.joint!r}, {spec.model}): {reg.label} ({reg.address}) "
            f"reads {back} after writing {value} (torque_limit {spec.torque_limit:g}); the "
            "servo did not take it, so its torque is not capped as configured (its "
            f"{ceiling.label} ({ceiling.address}) reads {self._read(unit, N.MAX_TORQUE)})",
            servo_id=spec.id,
            problem=StartupProblem.WRONG_MODE,
            expected=value,
            found=back,
        )

    def _read(self, unit: FeetechUnits, name: N) -> int:
        reg = unit.model.register(name)
        data, error = self.bus.read(unit.spec.id, reg.address, reg.size)
        self.errors[unit.spec.id] = error
        return reg.decode(data)

    def _goal_from_present(self, unit: FeetechUnits) -> None:
        present = unit.model.register(N.PRESENT_POSITION)
        goal = unit.model.register(N.GOAL_POSITION)
        data, _ = self.bus.read(unit.spec.id, present.address, present.size)
        self.bus.write(unit.spec.id, goal.address, goal.encode(present.decode(data)))

    # --- the cycle ----------------------------------------------------------------------

    def read_state(self) -> JointState:
        """One read of every servo, in SI units."""
        length, address = self._read_length, self._read_address
        if self.sync_read:
            replies = self.bus.sync_read(address, length, self.ids)
        else:
            replies = {i: self.bus.read(i, address, length) for i in self.ids}
        n = len(self.names)
        raw = np.empty((n, 4))  # (n, position / speed / load / temperature) [ticks, units]
        flags = [HardwareErrorFlags.NONE] * n
        errors = self.errors
        k = 0
        for unit, primary, (fmt, signs), slot in zip(
            self.units, self._primary, self._formats, self._slot, strict=True
        ):
            data, error = replies[unit.spec.id]
            errors[unit.spec.id] = error
            if primary:
                pos, speed, load, _, temp = fmt.unpack(data)
                raw[k] = (
                    _signed(pos, signs[0]),
                    _signed(speed, signs[1]),
                    _signed(load, signs[2]),
                    temp,
                )
                k += 1
            if error:
                flags[slot] |= _FLAGS[error]
        return JointState(
            names=self.names,
            position=self._offset + (raw[:, 0] - self._center) * self._scale,
            velocity=raw[:, 1] * self._scale,
            effort=raw[:, 2] * self._load_scale,
            temperature=raw[:, 3].copy(),
            hardware_errors=tuple(flags),
            timestamp=self.clock(),
            effort_unit=(EffortUnit.PERCENT,) * n,
            counters=self.bus.counters.copy(),
        )

    def goal_packet(self, positions: Mapping[str, float]) -> bytes | None:
        """The SYNC WRITE of Goal Position for ``positions`` (``CommandError`` if out of range).

        Goal ticks are 0 ~ 4095 (SCS 0 ~ 1023), never negative, so the sign bit of Goal
        Position's sign-magnitude encoding stays clear and the word is the tick itself.
        """
        params = bytearray((self._goal_address, self._goal_size))
        for joint, value in positions.items():
            for unit in self._goal_plans[joint]:
                params.append(unit.spec.id)
                params += unit.ticks(value).to_bytes(self._goal_size, unit.model.word_order.value)
        if len(params) == 2:
            return None
        packet = protocol.InstructionPacket(
            protocol.BROADCAST_ID, protocol.Instruction.SYNC_WRITE, bytes(params)
        )
        return protocol.encode_instruction(packet)

    # --- torque -------------------------------------------------------------------------

    def set_torque(self, ids: Sequence[int], enabled: bool, goal: bytes | None = None) -> None:
        """Write Torque Enable to ``ids`` and read it back.

        ``goal``: when enabling, the SYNC WRITE of the goals to hold (the caller's verified
        pose); without it, each servo's goal := its present position.

        Raises:
            HardwareFault: enabling a servo whose status reports a fault.
            TorqueNotConfirmed: disabling, a servo did not confirm.
        """
        units = [u for u in self.units if u.spec.id in ids]
        if enabled:
            for unit in units:
                flags = protocol.hardware_flags(self.errors.get(unit.spec.id, 0))
                if flags:
                    raise HardwareFault(unit.spec.id, flags, "TORQUE_ENABLE")
                if goal is None:
                    self._goal_from_present(unit)
            if goal is not None:
                self.bus.send(goal)
        off: list[int] = []
        on: list[int] = []
        silent: list[int] = []
        for unit in units:
            reg = unit.model.register(N.TORQUE_ENABLE)
            try:
                self.bus.write(unit.spec.id, reg.address, reg.encode(int(enabled)))
                data, _ = self.bus.read(unit.spec.id, reg.address, reg.size)
            except CommError:
                if enabled:
                    raise
                silent.append(unit.spec.id)
                continue
            (on if reg.decode(data) else off).append(unit.spec.id)
        if not enabled and (on or silent):
            raise TorqueNotConfirmed(off=tuple(off), on=tuple(on), silent=tuple(silent))

    def reboot(self, ids: Sequence[int]) -> None:
        """Restart ``ids`` (instruction 0x0A) and wait for them to answer again.

        Clears a latched overload; torque comes back off. Servos whose firmware has no
        reboot instruction answer nothing: then torque off, then on again clears it. A
        restart loads Torque Limit from Max Torque: the configured one is written again.
        """
        for servo_id in ids:
            self.bus.send(protocol.encode_instruction(protocol.reboot(servo_id)))
        # A servo answers the reboot before it restarts: that status packet must not be
        # taken for the first ping's answer (every later reply would then be one behind).
        self.bus.settle()
        deadline = time.monotonic() + 1.0
        for servo_id in ids:
            while self.bus.try_ping(servo_id) is None:
                if time.monotonic() > deadline:
                    raise CommTimeout(servo_id, "REBOOT")
            self.errors[servo_id] = 0
        self._write_torque_limits(ids)

    def close(self, torque_off: bool) -> None:
        """Turn torque off on every servo (when asked) and close the port."""
        try:
            if torque_off:
                self.set_torque(self.ids, False)
        finally:
            self.bus.close()
