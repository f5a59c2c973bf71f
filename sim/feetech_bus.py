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

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeGuard

from hilbot.hal.errors import ConfigError
from hilbot.hal.feetech import tables
from hilbot.hal.feetech.protocol import (
    OVERHEAD,
    DecodeError,
    InstructionPacket,
    PacketDecoder,
    PacketKind,
)
from hilbot.hal.feetech.register_names import FeetechRegister
from hilbot.sim.feetech_handler import FeetechInstructionHandler
from hilbot.sim.feetech_physics import feetech_physics
from hilbot.sim.feetech_servo import FeetechServo
from hilbot.sim.pty_server import PtyBusServer, check_unique_ids, initial_angles
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import ServoPhysics

FeetechServoList = Sequence[tuple[int, str]] | Mapping[int, str]
Instruction = InstructionPacket | DecodeError


class FeetechVirtualBus(PtyBusServer[FeetechServo, Instruction]):
    """Simulated Feetech servos answering on a pseudo-terminal.

    Args:
        servos: ``(id, model name)`` pairs or ``{id: model name}``.
        baudrate: the servos' bit rate [bit/s]; also the wire-timing rate when the
            host's rate cannot be read from the pty.
        clock: time source of the dynamics model [s] (wire timing uses real time).
        return_delay_time: Return Delay Time register of every servo [2 µs];
            ``None`` keeps the table's default (0).
        initial_positions: ``{id: raw step}`` at power-up; default the center step.
        physics: per-model overrides of the dynamics parameters.
        wire_timing: delay replies like a real bus; ``False`` answers at once.
        seed: seed of the injected random faults.
        model_factory: builds the dynamics model from ``(physics, initial_positions=...)``;
            a :class:`~hilbot.sim.mujoco_servos.BodyServoModel` puts the robot's body
            behind the servos (``hilbot sim-bus --physics mujoco``).

    Raises:
        ConfigError: unknown model, a bit rate a model cannot use, a duplicate id, or
            initial positions for servos not on the bus.
    """

    thread_name = "feetech-bus"
    log_label = "feetech bus"

    def __init__(
        self,
        servos: FeetechServoList,
        baudrate: int = 1_000_000,
        *,
        clock: Callable[[], float] = time.monotonic,
        return_delay_time: int | None = None,
        initial_positions: Mapping[int, int] | None = None,
        physics: Mapping[str, ServoPhysics] | None = None,
        wire_timing: bool = True,
        seed: int = 0,
        model_factory: Callable[..., ServoModel] = ServoModel,
    ) -> None:
        pairs = list(servos.items()) if isinstance(servos, Mapping) else list(servos)
        check_unique_ids(pairs)
        specs = [_model_spec(i, name, baudrate) for i, name in pairs]
        angles = initial_angles(pairs, specs, dict(initial_positions or {}))
        super().__init__(baudrate, clock=clock, wire_timing=wire_timing, seed=seed)
        overrides = physics or {}
        self.model = model_factory(
            [overrides.get(spec.name) or feetech_physics(spec.name) for spec in specs],
            initial_positions=angles,
        )
        self.servos = [
            FeetechServo(
                spec,
                i,
                self.model,
                k,
                baud_value=spec.baud_value(baudrate),
                return_delay_time=return_delay_time,
            )
            for k, ((i, _), spec) in enumerate(zip(pairs, specs, strict=True))
        ]
        self.handler = FeetechInstructionHandler(self.servos, self.faults, self.host_baudrate)

    # ------------------------------------------------------------------ protocol

    def _new_decoder(self) -> PacketDecoder:
        return PacketDecoder(PacketKind.INSTRUCTION)

    def _is_instruction(self, item: object) -> TypeGuard[Instruction]:
        return isinstance(item, InstructionPacket | DecodeError)

    def _wire_size(self, item: Instruction) -> int:
        return len(item.raw) if isinstance(item, DecodeError) else len(item.params) + OVERHEAD

    # ------------------------------------------------------------------ test API

    def register(self, servo_id: int, name: FeetechRegister) -> int:
        """Current value of a register, as a read would return it."""
        with self.lock:
            self._advance()
            servo = self.servo(servo_id)
            servo.refresh(self._clock())
            return servo.memory.get(name)


def _model_spec(servo_id: int, name: str, baudrate: int) -> tables.FeetechModel:
    try:
        spec = tables.model(name)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0]), servo_id=servo_id, field="model") from None
    try:
        spec.baud_value(baudrate)
    except ValueError as exc:
        raise ConfigError(f"servo {servo_id}: {exc}", servo_id=servo_id, field="baudrate") from None
    return spec
