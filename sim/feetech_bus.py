"""A virtual Feetech bus: real FT-SCS bytes on a pseudo-terminal.

``FeetechVirtualBus`` opens a pty and serves it from its own thread, so the Feetech
backend, the vendor SDK (``scservo_sdk``), rustypot or any serial tool opens
``bus.port`` like a USB adapter::

    with FeetechVirtualBus([(1, "STS3215"), (2, "STS3215")], baudrate=1_000_000) as bus:
        port = scservo_sdk.PortHandler(bus.port)
        ...
        bus.faults(2).drop_rate = 0.5

Packets are framed by ``hilbot.hal.feetech.protocol`` (no second codec); each id has
its model's memory table (``hilbot.hal.feetech.tables``) bound to the servo dynamics
model. The pty, the server thread and the wire timing are ``hilbot.sim.pty_server``'s,
shared with the virtual Dynamixel bus: a reply leaves when a real bus would have
delivered its last byte (the instruction's bytes, the servo's Return Delay Time, the
reply's bytes, 10 bits a byte at the host's rate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hilbot._compat import Unpack
from hilbot.hal.feetech import tables
from hilbot.hal.feetech.protocol import (
    OVERHEAD,
    DecodeError,
    InstructionPacket,
    PacketDecoder,
    PacketKind,
)
from hilbot.hal.feetech.protocol import (
    Instruction as Instruction_,
)
from hilbot.hal.feetech.tables import FeetechRegister
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.feetech_handler import FeetechInstructionHandler
from hilbot.sim.feetech_servo import FeetechServo
from hilbot.sim.pty_server import BusOptions, PtyBusServer, bus_model, check_unique_ids
from hilbot.sim.servo_physics import feetech_physics

FeetechServoList = Sequence[tuple[int, str]] | Mapping[int, str]
Instruction = InstructionPacket | DecodeError


class FeetechVirtualBus(PtyBusServer[FeetechServo, Instruction]):
    """Simulated Feetech servos answering on a pseudo-terminal.

    Args:
        servos: ``(id, model name)`` pairs or ``{id: model name}``.
        baudrate: the servos' bit rate [bit/s]; also the wire-timing rate when the
            host's rate cannot be read from the pty.
        **options: :class:`~hilbot.sim.pty_server.BusOptions`, as
            :class:`~hilbot.sim.pty_server.PtyBusServer` takes them (``clock``,
            ``physics``, ``wire_timing``, ``seed``, ``model_factory``);
            ``return_delay_time`` ``None`` keeps the table's default (0), and
            ``initial_positions`` are ``{id: raw step}`` (default the center step).
        models: memory tables by model name served instead of the shipped ones
            (``hilbot.hal.feetech.tables``) for the servos that name them: a firmware
            that differs from its table, e.g. one whose Torque Limit is read-only.

    Raises:
        ConfigError: unknown model, a bit rate a model cannot use, a duplicate id, or
            initial positions for servos not on the bus.
    """

    thread_name = "feetech-bus"
    log_label = "feetech bus"
    instruction_types = (InstructionPacket, DecodeError)

    def __init__(
        self,
        servos: FeetechServoList,
        baudrate: int = 1_000_000,
        *,
        models: Mapping[str, tables.FeetechModel] | None = None,
        **options: Unpack[BusOptions],
    ) -> None:
        pairs = list(servos.items()) if isinstance(servos, Mapping) else list(servos)
        check_unique_ids(pairs)
        variants = dict(models or {})

        def lookup(name: str) -> tables.FeetechModel:
            return variants[name] if name in variants else tables.model(name)

        specs = [bus_model(i, name, baudrate, lookup) for i, name in pairs]
        super().__init__(pairs, specs, baudrate, FeetechServo, feetech_physics, **options)
        self.handler = FeetechInstructionHandler(self.servos, self.faults, self.host_rate)

    # ------------------------------------------------------------------ protocol

    def _new_decoder(self) -> PacketDecoder:
        return PacketDecoder(PacketKind.INSTRUCTION)

    def _wire_size(self, item: Instruction) -> int:
        return len(item.raw) if isinstance(item, DecodeError) else len(item.params) + OVERHEAD

    def _note_position(
        self, item: Instruction, now: float, note: Callable[[str, float, list[int]], None]
    ) -> None:
        if isinstance(item, DecodeError) or not item.params or not self.servos:
            return
        spec = self.servos[0].memory.spec
        if item.instruction in (
            Instruction_.WRITE,
            Instruction_.REG_WRITE,
            Instruction_.SYNC_WRITE,
        ):
            kind, name = "goal", FeetechRegister.GOAL_POSITION
        elif item.instruction in (Instruction_.READ, Instruction_.SYNC_READ):
            kind, name = "read", FeetechRegister.PRESENT_POSITION
        else:
            return
        if item.params[0] == spec.register(name).address:
            note(kind, now, [servo.memory.get(name) for servo in self.servos])

    def _write_span(self, item: Instruction) -> tuple[int, int, int] | None:
        if isinstance(item, DecodeError) or item.instruction != Instruction_.WRITE:
            return None
        if len(item.params) < 2:
            return None
        return item.id, item.params[0], len(item.params) - 1

    # ------------------------------------------------------------------ test API

    def register(self, servo_id: int, name: FeetechRegister) -> int:
        """Current value of a register, as a read would return it."""
        return self._present_value(servo_id, lambda servo: servo.memory.get(name))


# ------------------------------------------------------------------ feetech_bus_runner
# ``running_feetech_bus``: a virtual Feetech bus for a config's servos, ready to enter.
def running_feetech_bus(
    servos: FeetechServoList | Sequence[ServoSpec],
    *,
    baudrate: int = 1_000_000,
    initial_positions: Mapping[str, float] | Mapping[int, int] | None = None,
    return_delay_time: int | None = None,
    seed: int = 0,
    clock: Callable[[], float] | None = None,
    **options: Any,
) -> FeetechVirtualBus:
    """A ``FeetechVirtualBus`` for ``servos``, to be entered with ``with`` or ``async with``.

    Args:
        servos: ``(id, model)`` pairs, ``{id: model}``, or ``ServoSpec`` values (as a
            robot config gives).
        baudrate: [bit/s]; one of the models' Baud Rate values (1 Mbps default).
        initial_positions: joint positions ``{joint: rad or m}`` (``ServoSpec`` servos
            only: converted through each servo's offset, direction and gear ratio), or
            raw ``{servo id: step}``.
        return_delay_time: Return Delay Time of every servo [2 µs]; ``None`` = default.
        seed: seed of injected random faults.
        clock: time source of the dynamics model; default ``time.monotonic``.
        **options: other ``FeetechVirtualBus`` keyword arguments (``physics``,
            ``wire_timing``).

    Raises:
        ConfigError: see ``FeetechVirtualBus``.
        TypeError: joint-space positions for servos given without joints.
    """
    pairs = _pairs(servos)
    ticks = _initial_ticks(servos, initial_positions or {})
    if clock is not None:
        options["clock"] = clock
    return FeetechVirtualBus(
        pairs,
        baudrate,
        initial_positions=ticks,
        return_delay_time=return_delay_time,
        seed=seed,
        **options,
    )


def _pairs(servos: FeetechServoList | Sequence[ServoSpec]) -> list[tuple[int, str]]:
    if isinstance(servos, Mapping):
        return list(servos.items())
    return [(s.id, s.model) if isinstance(s, ServoSpec) else (s[0], s[1]) for s in servos]


def _initial_ticks(
    servos: FeetechServoList | Sequence[ServoSpec],
    positions: Mapping[str, float] | Mapping[int, int],
) -> dict[int, int]:
    if not positions:
        return {}
    if all(isinstance(key, int) for key in positions):
        return {int(k): int(v) for k, v in positions.items()}
    specs = [] if isinstance(servos, Mapping) else [s for s in servos if isinstance(s, ServoSpec)]
    if not specs:
        raise TypeError("joint-space initial_positions need ServoSpec servos, not (id, model)")
    joints: Mapping[str, float] = positions  # type: ignore[assignment]
    out: dict[int, int] = {}
    for spec in specs:
        if spec.joint in joints:
            model = tables.model(spec.model)
            shaft = (float(joints[spec.joint]) - spec.offset) * spec.direction * spec.gear_ratio
            out[spec.id] = model.center_tick + round(shaft / model.radians_per_tick)
    return out
