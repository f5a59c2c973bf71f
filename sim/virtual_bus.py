"""A virtual Dynamixel bus: real Protocol 1.0 / 2.0 bytes on a pseudo-terminal.

``VirtualBus`` opens a pty and serves it from its own thread, so the real
``DynamixelBackend``, dynamixel-sdk or any serial tool opens ``bus.port`` like a U2D2::

    with VirtualBus({1: "XM430-W350", 2: "XM430-W350"}, protocol=2, baudrate=1_000_000) as bus:
        port = PortHandler(bus.port)
        ...
        bus.faults(2).drop_rate = 0.5

Packets are decoded and encoded by ``hilbot.hal.dynamixel.protocol`` (no second
codec); each id has a control table (``hilbot.hal.dynamixel.tables``) bound to the
servo dynamics model, advanced by the (injectable) clock. Replies leave at the time a
real bus would have delivered their last byte: the instruction's own wire time, then
per reply its servo's Return Delay Time and its bytes at 10 bits a byte. The server
thread blocks in ``poll`` between packets and sleeps until just before each deadline
(spinning only the last few microseconds), so an idle bus costs no CPU.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Self

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel import tables
from hilbot.hal.dynamixel.protocol import (
    DecodeError,
    InstructionPacket,
    PacketDecoder,
    PacketKind,
)
from hilbot.hal.errors import ConfigError, PortError
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim.faults import FaultTable, ServoFaults
from hilbot.sim.instruction_handler import InstructionHandler
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import ServoPhysics, physics_for
from hilbot.sim.virtual_servo import VirtualServo

_log = logging.getLogger(__name__)

BITS_PER_BYTE = 10  # 8N1: start bit, 8 data bits, stop bit
SERVER_NICE = 5  # how much the server thread raises its priority, where allowed
BACKGROUND_STEP_MS = 5  # model update period while servos move, when no packet comes
#: GIL switch interval while a bus runs in this process [s]. A client that busy-polls
#: the port (the stock dynamixel-sdk does) holds the GIL; at Python's default 5 ms the
#: server thread would wake up to 5 ms late for every reply.
SWITCH_INTERVAL = 2e-4
_TERMIOS_RATES = {
    getattr(termios, f"B{rate}"): rate
    for rate in (
        9600,
        19200,
        57600,
        115200,
        200000,
        230400,
        250000,
        400000,
        460800,
        500000,
        921600,
        1000000,
        2000000,
        2500000,
        3000000,
        4000000,
    )
    if hasattr(termios, f"B{rate}")
}

ServoList = Sequence[ServoSpec] | Mapping[int, str]


class VirtualBus:
    """Simulated Dynamixel servos answering on a pseudo-terminal.

    Args:
        servos: ``ServoSpec`` list (id and model are used) or ``{id: model name}``.
        protocol: 1 or 2; every model must speak it.
        baudrate: the servos' bit rate [bit/s]; also the rate used for wire timing when
            the host's rate cannot be read from the pty.
        clock: time source of the dynamics model [s] (wire timing uses real time).
        return_delay_time: Return Delay Time register of every servo [2 µs units];
            ``None`` keeps the factory default (250 = 500 µs).
        initial_positions: ``{id: ticks}`` at power-up; default the center tick.
        physics: per-model overrides of the dynamics parameters.
        wire_timing: delay replies like a real bus; ``False`` answers at once.
        seed: seed of the injected random faults.
        model_factory: builds the servos' dynamics model from ``(physics,
            initial_positions=...)``; a :class:`~hilbot.sim.mujoco_servos.BodyServoModel`
            puts a physical body behind the servos (``hilbot sim-bus --physics mujoco``).

    Raises:
        ConfigError: unknown model, a model that does not speak ``protocol``, a bit
            rate the model cannot use, or a duplicate id.
    """

    def __init__(
        self,
        servos: ServoList,
        protocol: int = 2,
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
        BusSpec("virtual", baudrate, protocol)  # validates protocol and baud rate
        self.protocol = protocol
        self.baudrate = baudrate
        self.wire_timing = wire_timing
        self.faults = FaultTable(seed)
        self.lock = threading.RLock()
        self._clock = clock
        pairs = (
            list(servos.items())
            if isinstance(servos, Mapping)
            else [(s.id, s.model) for s in servos]
        )
        specs = [_model_spec(i, name, protocol, baudrate) for i, name in pairs]
        _check_unique(pairs)
        positions = initial_positions or {}
        unknown = sorted(set(positions) - {i for i, _ in pairs})
        if unknown:
            raise ConfigError(f"initial_positions names servos not on the bus: {unknown}")
        overrides = physics or {}
        self.model = model_factory(
            [overrides.get(spec.name) or physics_for(spec.name) for spec in specs],
            initial_positions=[
                (positions.get(i, spec.center_tick) - spec.center_tick) * spec.radians_per_tick
                for (i, _), spec in zip(pairs, specs, strict=True)
            ],
        )
        self.servos = [
            VirtualServo(
                spec,
                i,
                self.model,
                k,
                baud_value=spec.baud_value(baudrate),
                return_delay_time=return_delay_time,
            )
            for k, ((i, _), spec) in enumerate(zip(pairs, specs, strict=True))
        ]
        self.handler = InstructionHandler(protocol, self.servos, self.faults, self.host_baudrate)
        self._watchdogs = [s for s in self.servos if s.spec.has_bus_watchdog]
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

    @classmethod
    def from_config(cls, servos: Sequence[ServoSpec], bus: BusSpec, **kwargs: object) -> VirtualBus:
        """A virtual bus for one configured bus: its servos, protocol and bit rate."""
        return cls(servos, bus.protocol, bus.baudrate, **kwargs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> str:
        """Path of the pty's slave side (e.g. ``/dev/pts/5``); open it like a U2D2."""
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
            target=self._serve, name=f"virtual-bus {self._port}", daemon=True
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

    def servo(self, servo_id: int) -> VirtualServo:
        """The servo configured with (or now answering to) ``servo_id``."""
        for servo in self.servos:
            if servo.id == servo_id:
                return servo
        raise KeyError(
            f"no servo with id {servo_id} on this bus; ids: {[s.id for s in self.servos]}"
        )

    def register(self, servo_id: int, name: tables.RegisterName) -> int:
        """Current value of a register, as a read would return it."""
        with self.lock:
            self._advance()
            servo = self.servo(servo_id)
            servo.refresh(self._clock())
            return servo.memory.get(name)

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
        self._expire_watchdogs(now)
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

    def _serve(self) -> None:
        _raise_priority()
        decoder = PacketDecoder(self.protocol, PacketKind.INSTRUCTION)
        poller = select.poll()
        poller.register(self._master, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        with self.lock:
            idle = self.model.at_rest()
        while True:
            # While something moves, advance the model every few ms so that answering
            # an instruction never has to integrate a long gap (which would delay it).
            events = dict(poller.poll(None if idle else BACKGROUND_STEP_MS))
            # The first instruction's bytes were readable by now: time its wire from here,
            # before the work of reading them. One that came in behind it, before the read,
            # still starts after the first has left the wire (``_wire_free``), never earlier.
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
                    _log.exception("virtual bus: failed to answer %r", item)
                    self.errors.append(exc)
                    idle = False

    def _answer(self, item: InstructionPacket | DecodeError, arrived: float) -> bool:
        """Answer one instruction at its wire time; return whether the model is at rest.

        The model's state is taken before the reply is written, so that once it is
        written the server thread goes straight back to ``poll`` and frees its CPU for
        the kernel work that delivers the reply to the host.
        """
        with self.lock:
            now = self._advance()
            replies = self.handler.handle(item, now)
            idle = self.model.at_rest()
        if not self.wire_timing:
            if replies:
                os.write(self._master, b"".join(reply.data for reply in replies))
            return idle
        byte_time = BITS_PER_BYTE / self.host_baudrate()
        # The pty delivers the host's bytes at once; on a wire they would take this long.
        done = max(arrived, self._wire_free) + _instruction_size(item) * byte_time
        if not replies:
            # An instruction without reply (sync write, broadcast) still holds the wire:
            # the next instruction's bytes queue behind it, as they would in a real adapter.
            self._wire_free = done
            return idle
        data = b"".join(reply.data for reply in replies)
        for reply in replies:
            done += reply.delay + len(reply.data) * byte_time
        # One write when the last reply's last byte would arrive: the host sees the
        # transaction end when a real bus would end it, for one wake-up per instruction.
        self._sleeper.wait_until(done)
        os.write(self._master, data)
        self._wire_free = done
        return idle


def _raise_priority() -> None:
    """Nice the server thread up a little: it stands in for hardware that answers in time.

    Lowering a nice value needs CAP_SYS_NICE (root in CI containers); without it the
    thread keeps the default priority.
    """
    with contextlib.suppress(OSError, AttributeError):
        thread = threading.get_native_id()
        os.setpriority(
            os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) - SERVER_NICE
        )


def _instruction_size(item: InstructionPacket | DecodeError) -> int:
    if isinstance(item, DecodeError):
        return len(item.raw)
    # 2.0: header 4, id, length 2, instruction, CRC 2; 1.0: header 2, id, length, checksum
    return len(item.params) + (10 if item.protocol == 2 else 6)


class Sleeper:
    """Waits for deadlines precisely without spinning long.

    ``time.sleep`` wakes up late by a scheduler-dependent amount; the sleeper learns its
    mean and mean deviation (moving averages, as TCP estimates a round-trip time) and
    sleeps that much less, ``mean + 2 x deviation``, then spins the few microseconds
    left. Sleeping only the mean would overshoot the deadline on half the waits; the
    margin makes an overshoot (a reply later than its wire time) rare, for a few tens of
    microseconds of spinning per reply. On an idle Linux box the mean is ~60 µs.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.mean = 1e-4  # [s] how late sleep() returns, on average (initial guess)
        self.deviation = 2e-5  # [s] mean absolute deviation of that lateness

    @property
    def slack(self) -> float:
        """How long before a deadline the sleep ends [s]; spinning covers the rest."""
        return min(self.mean + 2.0 * self.deviation, 2e-3)

    def wait_until(self, deadline: float) -> None:
        """Block until ``clock() >= deadline``."""
        clock = self._clock
        remaining = deadline - clock()
        slack = self.slack
        if remaining > slack:
            target = remaining - slack
            start = clock()
            time.sleep(target)
            late = (clock() - start) - target
            self.deviation = 0.9 * self.deviation + 0.1 * abs(late - self.mean)
            self.mean = min(max(0.9 * self.mean + 0.1 * late, 1e-5), 2e-3)
        while clock() < deadline:
            time.sleep(0.0)


class _GilTuning:
    """Shorten the GIL switch interval while any bus runs; restore it after the last."""

    _users = 0
    _saved = 0.0
    _lock = threading.Lock()

    @classmethod
    def acquire(cls) -> None:
        with cls._lock:
            if cls._users == 0:
                cls._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(cls._saved, SWITCH_INTERVAL))
            cls._users += 1

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users -= 1
            if cls._users == 0:
                sys.setswitchinterval(cls._saved)


def _model_spec(servo_id: int, name: str, protocol: int, baudrate: int) -> tables.ModelSpec:
    try:
        spec = tables.model(name)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0]), servo_id=servo_id, field="model") from None
    if spec.protocol != protocol:
        raise ConfigError(
            f"servo {servo_id}: {spec.name} speaks Protocol {spec.protocol}.0, "
            f"but the bus is Protocol {protocol}.0",
            servo_id=servo_id,
            field="model",
        )
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
