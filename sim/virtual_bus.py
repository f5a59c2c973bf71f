"""A virtual Dynamixel bus: real Protocol 1.0 / 2.0 bytes on a pseudo-terminal.

``VirtualBus`` opens a pty and serves it from its own thread, so the real
``DynamixelBackend``, dynamixel-sdk or any serial tool opens ``bus.port`` like a U2D2::

    with VirtualBus({1: "XM430-W350", 2: "XM430-W350"}, protocol=2, baudrate=1_000_000) as bus:
        port = PortHandler(bus.port)
        ...
        bus.faults(2).drop_rate = 0.5

Packets are decoded and encoded by ``hilbot.hal.dynamixel.protocol`` (no second
codec); each id has a control table (``hilbot.hal.dynamixel.tables``) bound to the
servo dynamics model, advanced by the (injectable) clock. The pty, the server thread
and the wire timing are ``hilbot.sim.pty_server``'s, shared with the Feetech bus: a
reply leaves at the time a real bus would have delivered its last byte.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hilbot._compat import Unpack
from hilbot.hal.dynamixel import tables
from hilbot.hal.dynamixel.layout import ServoUnits
from hilbot.hal.dynamixel.protocol import (
    DecodeError,
    InstructionPacket,
    PacketDecoder,
    PacketKind,
)
from hilbot.hal.dynamixel.protocol import (
    Instruction as Ins,
)
from hilbot.hal.errors import ConfigError
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim.instruction_handler import InstructionHandler
from hilbot.sim.pty_server import BusOptions, PtyBusServer, bus_model, check_unique_ids
from hilbot.sim.servo_physics import physics_for
from hilbot.sim.virtual_servo import VirtualServo

ServoList = Sequence[ServoSpec] | Mapping[int, str]
Instruction = InstructionPacket | DecodeError


class VirtualBus(PtyBusServer[VirtualServo, Instruction]):
    """Simulated Dynamixel servos answering on a pseudo-terminal.

    Args:
        servos: ``ServoSpec`` list (id and model are used) or ``{id: model name}``.
        protocol: 1 or 2; every model must speak it.
        baudrate: the servos' bit rate [bit/s]; also the rate used for wire timing when
            the host's rate cannot be read from the pty.
        **options: :class:`~hilbot.sim.pty_server.BusOptions`, as
            :class:`~hilbot.sim.pty_server.PtyBusServer` takes them (``clock``,
            ``physics``, ``wire_timing``, ``seed``, ``model_factory``);
            ``return_delay_time`` ``None`` keeps the factory default (250 = 500 µs),
            and ``initial_positions`` are ``{id: ticks}`` (default the center tick).

    Raises:
        ConfigError: unknown model, a model that does not speak ``protocol``, a bit
            rate the model cannot use, or a duplicate id.
    """

    instruction_types = (InstructionPacket, DecodeError)

    def __init__(
        self,
        servos: ServoList,
        protocol: int = 2,
        baudrate: int = 1_000_000,
        **options: Unpack[BusOptions],
    ) -> None:
        BusSpec("virtual", baudrate, protocol)  # validates protocol and baud rate
        self.protocol = protocol
        pairs = (
            list(servos.items())
            if isinstance(servos, Mapping)
            else [(s.id, s.model) for s in servos]
        )
        specs = [_model_spec(i, name, protocol, baudrate) for i, name in pairs]
        check_unique_ids(pairs)
        super().__init__(pairs, specs, baudrate, VirtualServo, physics_for, **options)
        self.handler = InstructionHandler(protocol, self.servos, self.faults, self.host_rate)
        self._watchdogs = [s for s in self.servos if s.spec.has_bus_watchdog]

    @classmethod
    def from_config(
        cls, servos: Sequence[ServoSpec], bus: BusSpec, **kwargs: Unpack[BusOptions]
    ) -> VirtualBus:
        """A virtual bus for one configured bus: its servos, protocol and bit rate."""
        return cls(servos, bus.protocol, bus.baudrate, **kwargs)

    # ------------------------------------------------------------------ protocol

    def _new_decoder(self) -> PacketDecoder:
        return PacketDecoder(self.protocol, PacketKind.INSTRUCTION)

    def _wire_size(self, item: Instruction) -> int:
        if isinstance(item, DecodeError):
            return len(item.raw)
        # 2.0: header 4, id, length 2, instruction, CRC 2; 1.0: header 2, id, length, checksum
        return len(item.params) + (10 if item.protocol == 2 else 6)

    def _write_span(self, item: Instruction) -> tuple[int, int, int] | None:
        if isinstance(item, DecodeError) or item.instruction != Ins.WRITE:
            return None
        width = 2 if item.protocol == 2 else 1
        if len(item.params) <= width:
            return None
        address = int.from_bytes(item.params[:width], "little")
        return item.id, address, len(item.params) - width

    def _before_step(self, now: float) -> None:
        self._expire_watchdogs(now)

    # ------------------------------------------------------------------ test API

    def register(self, servo_id: int, name: tables.RegisterName) -> int:
        """Current value of a register, as a read would return it."""
        return self._present_value(servo_id, lambda servo: servo.memory.get(name))

    def write_register(self, servo_id: int, name: tables.RegisterName, value: int) -> int:
        """WRITE ``value`` to a register as another host on the bus would; the ERR byte.

        The firmware's rules apply (EEPROM refused with torque on, ranges, Data Limit
        Error): this is another tool changing the servo behind the backend's back, not a
        test's poke into memory. ``0`` means the servo took it.
        """
        with self.lock:
            now = self._advance()
            servo = self.servo(servo_id)
            reg = servo.spec.table[name]
            return servo.write(reg.address, reg.encode(value), now)

    def _expire_watchdogs(self, now: float) -> None:
        """Trip every Bus Watchdog that expired before ``now``, each at its own deadline.

        The model is stepped to the deadline first, so the servo stops where it was
        then, however late the next packet (or background step) notices.
        """
        while True:
            due, servo = math.inf, None
            for candidate in self._watchdogs:
                deadline = candidate.watchdog_deadline()
                if deadline < due:
                    due, servo = deadline, candidate
            if servo is None or due >= now:
                return
            faults = self.faults.get(servo.id)
            if faults is not None and not faults.answers:
                servo.heard(now)  # unpowered or hung: no firmware runs the watchdog
                continue
            if due > self._last:
                self.model.step(due - self._last)
                self._last = due
            servo.trip_watchdog()


def _model_spec(servo_id: int, name: str, protocol: int, baudrate: int) -> tables.ModelSpec:
    def speaks_protocol(spec: tables.ModelSpec) -> None:
        if spec.protocol != protocol:
            raise ConfigError(
                f"servo {servo_id}: {spec.name} speaks Protocol {spec.protocol}.0, "
                f"but the bus is Protocol {protocol}.0",
                servo_id=servo_id,
                field="model",
            )

    return bus_model(servo_id, name, baudrate, tables.model, speaks_protocol)


# ------------------------------------------------------------------ virtual_bus_runner
# ``running_virtual_bus``: a virtual Dynamixel bus set up in joint space, ready to enter.
def running_virtual_bus(
    servos: ServoList,
    *,
    protocol: int = 2,
    baudrate: int = 1_000_000,
    initial_positions: Mapping[str, float] | Mapping[int, int] | None = None,
    return_delay_time: int | None = None,
    seed: int = 0,
    clock: Callable[[], float] | None = None,
    **options: Any,
) -> VirtualBus:
    """A ``VirtualBus`` for ``servos``, to be entered with ``with`` or ``async with``.

    Args:
        servos: ``ServoSpec`` list (as a robot config gives) or ``{id: model name}``.
        protocol: 1 or 2.
        baudrate: [bit/s].
        initial_positions: joint positions ``{joint name: rad or m}`` (converted to
            ticks through each servo's offset, direction and gear ratio, shadows
            included), or raw ``{servo id: ticks}``.
        return_delay_time: register value [2 µs] for every servo; ``None`` = default.
        seed: seed of injected random faults.
        clock: time source of the dynamics model; default ``time.monotonic``.
        **options: other ``VirtualBus`` keyword arguments (``physics``, ``wire_timing``).
    """
    ticks = _initial_ticks(servos, initial_positions or {})
    if clock is not None:
        options["clock"] = clock
    return VirtualBus(
        servos,
        protocol,
        baudrate,
        initial_positions=ticks,
        return_delay_time=return_delay_time,
        seed=seed,
        **options,
    )


def _initial_ticks(
    servos: ServoList, positions: Mapping[str, float] | Mapping[int, int]
) -> dict[int, int]:
    if not positions:
        return {}
    if all(isinstance(key, int) for key in positions):
        return {int(k): int(v) for k, v in positions.items()}
    if isinstance(servos, Mapping):
        raise TypeError("joint-space initial_positions need ServoSpec servos, not {id: model}")
    return _joint_ticks(servos, positions)  # type: ignore[arg-type]


def _joint_ticks(servos: Sequence[ServoSpec], positions: Mapping[str, float]) -> dict[int, int]:
    out: dict[int, int] = {}
    for spec in servos:
        if spec.joint in positions:
            out[spec.id] = ServoUnits.of(spec).ticks(float(positions[spec.joint]))
    return out
