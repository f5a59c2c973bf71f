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
model. Wire timing, the server thread's sleeping and the GIL tuning are the virtual
Dynamixel bus's (``hilbot.sim.virtual_bus``): a reply leaves when a real bus would
have delivered its last byte (the instruction's bytes, the servo's Return Delay
Time, the reply's bytes, 10 bits a byte at the host's rate).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import termios
import threading
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Self

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.errors import ConfigError, PortError
from hilbot.hal.feetech import tables
from hilbot.hal.feetech.protocol import (
    OVERHEAD,
    DecodeError,
    InstructionPacket,
    PacketDecoder,
    PacketKind,
)
from hilbot.hal.feetech.register_names import FeetechRegister
from hilbot.sim.faults import FaultTable, ServoFaults
from hilbot.sim.feetech_handler import FeetechInstructionHandler
from hilbot.sim.feetech_physics import feetech_physics
from hilbot.sim.feetech_servo import FeetechServo
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import ServoPhysics
from hilbot.sim.virtual_bus import (
    _TERMIOS_RATES,
    BACKGROUND_STEP_MS,
    BITS_PER_BYTE,
    Sleeper,
    _GilTuning,
    _raise_priority,
)

_log = logging.getLogger(__name__)

FeetechServoList = Sequence[tuple[int, str]] | Mapping[int, str]


class FeetechVirtualBus:
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
        _check_unique(pairs)
        specs = [_model_spec(i, name, baudrate) for i, name in pairs]
        positions = dict(initial_positions or {})
        unknown = sorted(set(positions) - {i for i, _ in pairs})
        if unknown:
            raise ConfigError(f"initial_positions names servos not on the bus: {unknown}")
        self.baudrate = baudrate
        self.wire_timing = wire_timing
        self.faults = FaultTable(seed)
        self.lock = threading.RLock()
        self._clock = clock
        overrides = physics or {}
        self.model = model_factory(
            [overrides.get(spec.name) or feetech_physics(spec.name) for spec in specs],
            initial_positions=[
                (positions.get(i, spec.center_tick) - spec.center_tick) * spec.radians_per_tick
                for (i, _), spec in zip(pairs, specs, strict=True)
            ],
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
        self._last = clock()
        self._power_cycles: dict[int, int] = {}
        self._master = self._slave = -1
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None
        self._port = ""
        self._wire_free = 0.0
        self._sleeper = Sleeper()
        #: Exceptions raised while answering (a bug in the simulation, never the host's).
        self.errors: list[Exception] = []

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> str:
        """Path of the pty's slave side; open it like a USB adapter."""
        if not self._port:
            raise PortError("the virtual bus is not running; use it as a context manager", port="")
        return self._port

    @property
    def running(self) -> bool:
        """Whether the server thread is serving the pty."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Open the pty and start serving it."""
        if self._thread is not None:
            raise RuntimeError("the virtual bus is already running")
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        self._port = os.ttyname(self._slave)
        self._wake_r, self._wake_w = os.pipe()
        _GilTuning.acquire()
        self._thread = threading.Thread(
            target=self._serve, name=f"feetech-bus {self._port}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the pty; safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is not None:
            os.write(self._wake_w, b"x")
            thread.join(timeout=5.0)
            _GilTuning.release()
        for fd in (self._master, self._slave, self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._master = self._slave = self._wake_r = self._wake_w = -1
        self._port = ""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ test API

    def servo(self, servo_id: int) -> FeetechServo:
        """The servo configured with (or now answering to) ``servo_id``."""
        for servo in self.servos:
            if servo.id == servo_id:
                return servo
        raise KeyError(
            f"no servo with id {servo_id} on this bus; ids: {[s.id for s in self.servos]}"
        )

    def register(self, servo_id: int, name: FeetechRegister) -> int:
        """Current value of a register, as a read would return it."""
        with self.lock:
            self._advance()
            servo = self.servo(servo_id)
            servo.refresh(self._clock())
            return servo.memory.get(name)

    def set_load(self, servo_id: int, torque: float) -> None:
        """Apply a constant external torque [N·m] to a servo's shaft."""
        with self.lock:
            self._advance()
            self.model.set_external_torque([self.servo(servo_id).index], float(torque))

    def raise_hardware_error(self, servo_id: int, flags: HardwareErrorFlags) -> None:
        """Latch hardware-error bits now (same as ``faults(id).hardware_error = flags``)."""
        with self.lock:
            self._advance()
            self.model.raise_error([self.servo(servo_id).index], flags)

    def fault(self, servo_id: int) -> ServoFaults:
        """Alias of ``faults(servo_id)``."""
        return self.faults(servo_id)

    def host_baudrate(self) -> int:
        """The bit rate the host set on the pty, or the bus's rate if it cannot be read."""
        if self._slave < 0:
            return self.baudrate
        try:
            speed = termios.tcgetattr(self._slave)[5]
        except termios.error:
            return self.baudrate
        return _TERMIOS_RATES.get(speed, self.baudrate)

    # ------------------------------------------------------------------ server

    def _advance(self) -> float:
        now = self._clock()
        self.model.step(now - self._last)
        self._last = max(self._last, now)
        for faults in self.faults.records():
            try:
                servo = self.servo(faults.servo_id)
            except KeyError:
                continue
            flags = faults.take_hardware_error()
            if flags:
                self.model.raise_error([servo.index], flags)
            if faults.power_cycles != self._power_cycles.get(faults.servo_id, 0):
                self._power_cycles[faults.servo_id] = faults.power_cycles
                servo.reboot()
        return now

    def _serve(self) -> None:
        _raise_priority()
        decoder = PacketDecoder(PacketKind.INSTRUCTION)
        poller = select.poll()
        poller.register(self._master, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        with self.lock:
            idle = self.model.at_rest()
        while True:
            events = dict(poller.poll(None if idle else BACKGROUND_STEP_MS))
            arrived = time.monotonic()
            if self._wake_r in events:
                return
            if self._master not in events:
                with self.lock:
                    self._advance()
                    idle = self.model.at_rest()
                continue
            try:
                data = os.read(self._master, 4096)
            except OSError:
                return
            for item in decoder.feed(data):
                if not isinstance(item, InstructionPacket | DecodeError):
                    continue
                try:
                    idle = self._answer(item, arrived)
                except Exception as exc:  # keep serving; tests check bus.errors
                    _log.exception("feetech bus: failed to answer %r", item)
                    self.errors.append(exc)
                    idle = False

    def _answer(self, item: InstructionPacket | DecodeError, arrived: float) -> bool:
        """Answer one instruction at its wire time; return whether the model is at rest."""
        with self.lock:
            now = self._advance()
            replies = self.handler.handle(item, now)
            idle = self.model.at_rest()
        if not self.wire_timing:
            if replies:
                os.write(self._master, b"".join(reply.data for reply in replies))
            return idle
        byte_time = BITS_PER_BYTE / self.host_baudrate()
        size = len(item.raw) if isinstance(item, DecodeError) else len(item.params) + OVERHEAD
        done = max(arrived, self._wire_free) + size * byte_time
        if not replies:
            self._wire_free = done
            return idle
        for reply in replies:
            done += reply.delay + len(reply.data) * byte_time
        self._sleeper.wait_until(done)
        os.write(self._master, b"".join(reply.data for reply in replies))
        self._wire_free = done
        return idle


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


def _check_unique(pairs: Sequence[tuple[int, str]]) -> None:
    seen: set[int] = set()
    for servo_id, _ in pairs:
        if servo_id in seen:
            raise ConfigError(
                f"servo id {servo_id} appears twice on the bus", servo_id=servo_id, field="id"
            )
        seen.add(servo_id)
