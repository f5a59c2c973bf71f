"""The pseudo-terminal server both virtual buses run (Dynamixel and Feetech).

:class:`PtyBusServer` owns the pty, the server thread, the wire timing and the servos'
dynamics model; a subclass brings its protocol: its models and servo firmware, the
instruction handler, a decoder and the size of an instruction on the wire. Replies
leave at the time a real bus would have delivered their last byte: the instruction's
own wire time, then per reply its servo's Return Delay Time and its bytes at 10 bits
a byte. The server thread blocks in ``poll`` between packets and sleeps until just
before each deadline (spinning only the last few microseconds), so an idle bus costs
no CPU.

Pseudo-terminals are POSIX: ``termios`` and ``tty`` are imported where a bus starts (and
where it reads the host's bit rate), not at module level, so the module imports on
Windows, where starting a bus raises :class:`~hilbot.hal.errors.HalError` in one line.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import select
import struct
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, TypedDict, TypeGuard, TypeVar

from hilbot._compat import Self
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.errors import ConfigError, HalError, PortError
from hilbot.sim.bus_replies import Reply
from hilbot.sim.eeprom_file import EepromFile
from hilbot.sim.faults import FaultTable, ServoFaults
from hilbot.sim.plug_in import PlugIn
from hilbot.sim.server_timing import GilTuning, Sleeper, raise_priority
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import ServoPhysics

BITS_PER_BYTE = 10  # 8N1: start bit, 8 data bits, stop bit
BACKGROUND_STEP_MS = 5  # model update period while servos move, when no packet comes
#: Linux ``TCGETS2``: the pty's ``struct termios2``, whose ``c_ospeed`` is the bit rate
#: itself, standard or not (pyserial sets non-standard ones with ``BOTHER``).
_TCGETS2 = 0x802C542A
_TERMIOS2 = struct.Struct("4I B 19s 2I")  # c_*flag, c_line, c_cc[19], c_ispeed, c_ospeed


@functools.cache
def termios_rates() -> dict[int, int]:
    """``{termios speed constant: bit rate}`` of this platform (POSIX only)."""
    import termios

    out = {}
    for name in dir(termios):
        if name.startswith("B") and name[1:].isdigit():
            out[getattr(termios, name)] = int(name[1:])
    return out


def pty_bit_rate(fd: int) -> int | None:
    """The bit rate a host set on the terminal ``fd`` [bit/s], ``None`` if it cannot be told.

    On Linux the kernel's ``termios2`` gives the rate itself, so a non-standard one
    (76800, 128000, 1152000, set with ``BOTHER`` as pyserial does) reads as it was set.
    Elsewhere the speed constant is looked up (on macOS it is the rate itself).
    """
    import termios

    if sys.platform.startswith("linux"):
        import fcntl

        buf = bytearray(_TERMIOS2.size)
        try:
            fcntl.ioctl(fd, _TCGETS2, buf)
        except OSError:
            pass
        else:
            ospeed = _TERMIOS2.unpack(bytes(buf))[-1]
            if ospeed > 0:
                return int(ospeed)
    try:
        speed = termios.tcgetattr(fd)[5]
    except termios.error:
        return None
    rates = termios_rates()
    if speed in rates:
        return rates[speed]
    # BSD and macOS: speed_t is the bit rate; B0 and unknown constants tell nothing.
    return int(speed) if sys.platform == "darwin" and speed > 0 else None


def require_ptys() -> None:
    """Check that this platform has pseudo-terminals, for a virtual bus to serve on.

    Raises:
        HalError: it has not (Windows), in one line (no port is involved to name).
    """
    try:
        import termios  # noqa: F401  # the pty's settings (host_baudrate)
        import tty  # noqa: F401  # raw mode
    except ImportError:
        pass
    else:
        if hasattr(os, "openpty"):
            return
    raise HalError(
        f"the virtual buses need pseudo-terminals (POSIX); not available on {sys.platform}"
    )


class ServedServo(Protocol):
    """What the server needs of a simulated servo."""

    @property
    def id(self) -> int:
        """The id the servo answers to now."""
        ...

    @property
    def index(self) -> int:
        """The servo's joint in the dynamics model."""
        ...

    def refresh(self, now: float) -> None:
        """Copy the model's present values into the present-value registers."""
        ...

    def reboot(self) -> None:
        """Restart the firmware (a power cycle)."""
        ...

    def eeprom_image(self) -> bytes:
        """The EEPROM as it would survive power-off."""
        ...

    def setting_addresses(self) -> tuple[range, range]:
        """The bytes of its ID register and of its Baud Rate register."""
        ...

    def restore_eeprom(self, image: bytes) -> None:
        """Power up with ``image`` as the EEPROM."""
        ...


class PacketFeed(Protocol):
    """A streaming decoder: bytes in, whatever they completed out."""

    def feed(self, data: bytes) -> Iterable[object]:
        """Decode ``data``, appended to what came before."""
        ...


ServoT = TypeVar("ServoT", bound=ServedServo)
ItemT = TypeVar("ItemT")
ItemT_contra = TypeVar("ItemT_contra", contravariant=True)


class InstructionHandling(Protocol[ItemT_contra]):
    """Plans the replies to one decoded instruction (or undecodable frame)."""

    #: The servos on the wire (``PtyBusServer.connect`` changes them).
    servos: list[Any]

    def handle(self, item: ItemT_contra, now: float) -> Sequence[Reply]:
        """Execute ``item`` at ``now`` [s]; the replies to send, in order."""
        ...


class TickScale(Protocol):
    """What turning a servo's power-up position into a shaft angle needs of its model."""

    @property
    def center_tick(self) -> int:
        """The tick of the joint's zero."""
        ...

    @property
    def radians_per_tick(self) -> float:
        """The angle of one tick [rad]."""
        ...


class BusModel(TickScale, Protocol):
    """What the server needs of a servo model (Dynamixel or Feetech table)."""

    @property
    def name(self) -> str:
        """The model's name, e.g. ``"XM430-W350"``; keys ``physics`` overrides."""
        ...

    def baud_value(self, baudrate: int) -> int:
        """The Baud Rate register value of ``baudrate`` [bit/s]; ``ValueError`` if none."""
        ...


SpecT = TypeVar("SpecT", bound=BusModel)


class BusOptions(TypedDict, total=False):
    """The keyword arguments both virtual buses take (see :class:`PtyBusServer`)."""

    clock: Callable[[], float]
    return_delay_time: int | None
    initial_positions: Mapping[int, int] | None
    physics: Mapping[str, ServoPhysics] | None
    wire_timing: bool
    seed: int
    model_factory: Callable[..., ServoModel]
    eeprom_file: Path | None


class BackgroundService(ABC):
    """Runs from its own thread between :meth:`start` and :meth:`stop`; a context manager.

    ``with service:`` starts it and stops it on the way out, whatever happened inside.
    """

    @abstractmethod
    def start(self) -> None:
        """Start the thread."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the thread; safe to call twice."""

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


class PtyBusServer(BackgroundService, Generic[ServoT, ItemT]):
    """Simulated servos answering on a pseudo-terminal, from their own thread.

    A subclass looks its servos' models up, calls this ``__init__`` (which builds the
    dynamics model and the servos), then sets ``handler``; it implements
    :meth:`_new_decoder` and :meth:`_wire_size` and names its ``instruction_types``.

    Args:
        pairs: ``(id, model name)`` of every servo on the bus, in joint order.
        specs: their models, in the same order.
        baudrate: the servos' bit rate [bit/s]; also the rate used for wire timing when
            the host's rate cannot be read from the pty.
        new_servo: builds one servo's firmware from ``(spec, id, model, index,
            baud_value=..., return_delay_time=...)`` (the family's servo class).
        default_physics: model name -> the dynamics parameters of that model.
        clock: time source of the dynamics model [s] (wire timing uses real time).
        return_delay_time: Return Delay Time register of every servo [2 µs];
            ``None`` keeps the model's default.
        initial_positions: ``{id: tick}`` at power-up; default the center tick.
        physics: per-model overrides of the dynamics parameters.
        wire_timing: delay replies like a real bus; ``False`` answers at once.
        seed: seed of the injected random faults.
        model_factory: builds the dynamics model from ``(physics, initial_positions=...)``;
            a :class:`~hilbot.sim.mujoco_servos.BodyServoModel` puts the robot's body
            behind the servos (``hilbot sim-bus --physics mujoco``).
        eeprom_file: keep the servos' EEPROM in this file (``hilbot.sim.eeprom_file``):
            loaded when the bus starts, saved when a write changed it and when it stops,
            so that ids, baud rates, offsets and limits survive a restart. ``None``:
            every start is factory-fresh.

    Raises:
        ConfigError: ``initial_positions`` names a servo that is not on the bus.
    """

    #: Name of the server thread, before the port.
    thread_name: ClassVar[str] = "virtual-bus"
    #: How the log names this bus (in the subclass's module logger).
    log_label: ClassVar[str] = "virtual bus"
    #: What the decoder yields that is for the handler (instructions and bad frames).
    instruction_types: ClassVar[tuple[type, ...]]

    model: ServoModel
    servos: list[ServoT]
    handler: InstructionHandling[ItemT]

    def __init__(
        self,
        pairs: Sequence[tuple[int, str]],
        specs: Sequence[SpecT],
        baudrate: int,
        new_servo: Callable[..., ServoT],
        default_physics: Callable[[str], ServoPhysics],
        *,
        clock: Callable[[], float] = time.monotonic,
        return_delay_time: int | None = None,
        initial_positions: Mapping[int, int] | None = None,
        physics: Mapping[str, ServoPhysics] | None = None,
        wire_timing: bool = True,
        seed: int = 0,
        model_factory: Callable[..., ServoModel] = ServoModel,
        eeprom_file: Path | None = None,
    ) -> None:
        angles = initial_angles(pairs, specs, initial_positions or {})
        self.baudrate = baudrate
        self.wire_timing = wire_timing
        self.faults = FaultTable(seed)
        self.lock = threading.RLock()
        self._clock = clock
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
        overrides = physics or {}
        self.model = model_factory(
            [overrides.get(spec.name) or default_physics(spec.name) for spec in specs],
            initial_positions=angles,
        )
        self.servos = [
            new_servo(
                spec,
                i,
                self.model,
                k,
                baud_value=spec.baud_value(baudrate),
                return_delay_time=return_delay_time,
            )
            for k, ((i, _), spec) in enumerate(zip(pairs, specs, strict=True))
        ]
        self._eeprom = (
            None
            if eeprom_file is None
            else EepromFile(Path(eeprom_file), self.servos, [spec.name for spec in specs])
        )
        #: What loading the EEPROM file said (slots left factory-fresh).
        self.eeprom_notes: list[str] = []
        #: Servos plugged in one at a time (``hilbot.sim.plug_in``), or ``None``.
        self.plug_in: PlugIn | None = None
        #: Set when the first bytes from a host arrive (a client opened the port and
        #: talks; opening a pty alone sends nothing the bus can see).
        self.first_packet = threading.Event()

    @abstractmethod
    def _new_decoder(self) -> PacketFeed:
        """A fresh decoder of the host's bytes."""

    def _is_instruction(self, item: object) -> TypeGuard[ItemT]:
        """Whether a decoded ``item`` is for the handler (an instruction or a bad frame)."""
        return isinstance(item, self.instruction_types)

    @abstractmethod
    def _wire_size(self, item: ItemT) -> int:
        """Bytes ``item`` took on the wire."""

    def _write_span(self, item: ItemT) -> tuple[int, int, int] | None:
        """``(id, address, length)`` of a WRITE instruction, else ``None``; by default none."""
        return None

    def connect(self, slots: Iterable[int]) -> None:
        """Put exactly the servos of ``slots`` (indexes in bus order) on the wire.

        The others are unplugged: they hear nothing. One newly connected powers up.
        """
        with self.lock:
            chosen = sorted(set(slots))
            wired = set(map(id, self.handler.servos))
            servos = [self.servos[k] for k in chosen]
            for servo in servos:
                if id(servo) not in wired:
                    servo.reboot()
            self.handler.servos = servos

    def _before_step(self, now: float) -> None:
        """Run before the model is stepped to ``now``; by default nothing."""

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> str:
        """Path of the pty's slave side (e.g. ``/dev/pts/5``); open it like an adapter."""
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
        require_ptys()
        import tty

        if self._eeprom is not None:
            with self.lock:
                self.eeprom_notes = self._eeprom.load()

        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        self._port = os.ttyname(self._slave)
        self._wake_r, self._wake_w = os.pipe()
        GilTuning.acquire()
        self._thread = threading.Thread(
            target=self._serve, name=f"{self.thread_name} {self._port}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the pty; safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is not None:
            os.write(self._wake_w, b"x")
            thread.join(timeout=5.0)
            GilTuning.release()
        for fd in (self._master, self._slave, self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._master = self._slave = self._wake_r = self._wake_w = -1
        self._port = ""
        self.save_eeprom()

    def save_eeprom(self) -> None:
        """Write the EEPROM file now if any servo's EEPROM changed (no file: nothing)."""
        if self._eeprom is None:
            return
        with self.lock:
            try:
                self._eeprom.save_if_changed()
            except OSError as exc:
                logging.getLogger(type(self).__module__).error(
                    "%s: cannot save the EEPROM to %s: %s", self.log_label, self._eeprom.path, exc
                )

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ test API

    def servo(self, servo_id: int) -> ServoT:
        """The servo configured with (or now answering to) ``servo_id``."""
        for servo in self.servos:
            if servo.id == servo_id:
                return servo
        raise KeyError(
            f"no servo with id {servo_id} on this bus; ids: {[s.id for s in self.servos]}"
        )

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

    def _present_value(self, servo_id: int, read: Callable[[ServoT], int]) -> int:
        """``read`` of a servo whose registers were just refreshed, as a READ would see it."""
        with self.lock:
            self._advance()
            servo = self.servo(servo_id)
            servo.refresh(self._clock())
            return read(servo)

    def fault(self, servo_id: int) -> ServoFaults:
        """Alias of ``faults(servo_id)``."""
        return self.faults(servo_id)

    def host_rate(self) -> int | None:
        """The bit rate the host set on the pty [bit/s], ``None`` when it cannot be told.

        A servo hears the host only at its own rate: an unknown rate matches no servo.
        """
        if self._slave < 0:
            return self.baudrate
        return pty_bit_rate(self._slave)

    def host_baudrate(self) -> int:
        """The host's bit rate for wire timing; the bus's rate when it cannot be told."""
        return self.host_rate() or self.baudrate

    # ------------------------------------------------------------------ server

    def _advance(self) -> float:
        now = self._clock()
        self._before_step(now)
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
        raise_priority()
        decoder = self._new_decoder()
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
            self.first_packet.set()
            for item in decoder.feed(data):
                if not self._is_instruction(item):
                    continue
                try:
                    idle = self._answer(item, arrived)
                    if self._eeprom is not None:
                        self.save_eeprom()
                except Exception as exc:  # keep serving; tests check bus.errors
                    logging.getLogger(type(self).__module__).exception(
                        "%s: failed to answer %r", self.log_label, item
                    )
                    self.errors.append(exc)
                    idle = False

    def _answer(self, item: ItemT, arrived: float) -> bool:
        """Answer one instruction at its wire time; return whether the model is at rest.

        The model's state is taken before the reply is written, so that once it is
        written the server thread goes straight back to ``poll`` and frees its CPU for
        the kernel work that delivers the reply to the host.
        """
        with self.lock:
            now = self._advance()
            plug_in, old_id = self.plug_in, None
            if plug_in is not None:
                plug_in.before(getattr(item, "id", -1), int(getattr(item, "instruction", -1)))
                slot = plug_in.slot
                old_id = None if slot is None else self.servos[slot].id
            replies = self.handler.handle(item, now)
            if plug_in is not None and old_id is not None:
                span = self._write_span(item)
                if span is not None and span[0] in (old_id, 0xFE):
                    plug_in.after_write(span[1], span[2])
            idle = self.model.at_rest()
        if not self.wire_timing:
            if replies:
                os.write(self._master, b"".join(reply.data for reply in replies))
            return idle
        byte_time = BITS_PER_BYTE / self.host_baudrate()
        # The pty delivers the host's bytes at once; on a wire they would take this long.
        done = max(arrived, self._wire_free) + self._wire_size(item) * byte_time
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


def check_unique_ids(pairs: Sequence[tuple[int, str]]) -> None:
    """Raise ``ConfigError`` if an id appears twice among ``(id, model name)`` pairs."""
    seen: set[int] = set()
    for servo_id, _ in pairs:
        if servo_id in seen:
            raise ConfigError(
                f"servo id {servo_id} appears twice on the bus", servo_id=servo_id, field="id"
            )
        seen.add(servo_id)


def bus_model(
    servo_id: int,
    name: str,
    baudrate: int,
    lookup: Callable[[str], SpecT],
    check: Callable[[SpecT], None] | None = None,
) -> SpecT:
    """The model of servo ``servo_id``, checked for the bus.

    Args:
        servo_id: the servo's id (named in the errors).
        name: its model's name.
        baudrate: the bus's bit rate [bit/s]; the model must have a Baud Rate value for it.
        lookup: the family's model table (``KeyError`` for an unknown name).
        check: the family's own check of the model, run before the bit rate's.

    Raises:
        ConfigError: unknown model, a failed ``check``, or a bit rate the model cannot use.
    """
    try:
        spec = lookup(name)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0]), servo_id=servo_id, field="model") from None
    if check is not None:
        check(spec)
    try:
        spec.baud_value(baudrate)
    except ValueError as exc:
        raise ConfigError(f"servo {servo_id}: {exc}", servo_id=servo_id, field="baudrate") from None
    return spec


def initial_angles(
    pairs: Sequence[tuple[int, str]], specs: Sequence[TickScale], positions: Mapping[int, int]
) -> list[float]:
    """The servos' shaft angles at power-up [rad], in ``pairs`` order.

    Args:
        pairs: ``(id, model name)`` of every servo on the bus.
        specs: their models, in the same order.
        positions: ``{id: tick}`` at power-up; a servo not named starts at its center tick.

    Raises:
        ConfigError: ``positions`` names a servo that is not on the bus.
    """
    unknown = sorted(set(positions) - {i for i, _ in pairs})
    if unknown:
        raise ConfigError(f"initial_positions names servos not on the bus: {unknown}")
    return [
        (positions.get(i, spec.center_tick) - spec.center_tick) * spec.radians_per_tick
        for (i, _), spec in zip(pairs, specs, strict=True)
    ]
