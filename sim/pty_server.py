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
import json
import logging
import os
import select
import struct
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, TypedDict, TypeGuard, TypeVar

from hilbot._compat import Self
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.errors import ConfigError, HalError, PortError
from hilbot.sim.faults import FaultTable, ReplyFate, ServoFaults
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
    :meth:`_new_decoder` and :meth:`_wire_size` and :meth:`_is_instruction`.

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
            a :class:`~hilbot.sim.mujoco_body.BodyServoModel` puts the robot's body
            behind the servos (``hilbot sim-bus --physics mujoco``).
        eeprom_file: keep the servos' EEPROM in this file (``hilbot.sim.pty_server``):
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
        #: Servos plugged in one at a time (``hilbot.sim.pty_server``), or ``None``.
        self.plug_in: PlugIn | None = None
        #: Called under the bus's lock after a goal-position write or a position read was
        #: answered, with ``(kind, time, ticks)``: kind ``"goal"`` or ``"read"``, the bus's
        #: clock [s], and every servo's Goal or Present Position [ticks] in servo order
        #: (``hilbot sim-bus --log-positions``). ``None``: nothing noted.
        self.on_position: Callable[[str, float, list[int]], None] | None = None
        #: Set when the first bytes from a host arrive (a client opened the port and
        #: talks; opening a pty alone sends nothing the bus can see).
        self.first_packet = threading.Event()

    @abstractmethod
    def _new_decoder(self) -> PacketFeed:
        """A fresh decoder of the host's bytes."""

    @abstractmethod
    def _is_instruction(self, item: object) -> TypeGuard[ItemT]:
        """Whether a decoded ``item`` is for the handler (an instruction or a bad frame)."""

    @abstractmethod
    def _wire_size(self, item: ItemT) -> int:
        """Bytes ``item`` took on the wire."""

    def _note_position(
        self, item: ItemT, now: float, note: Callable[[str, float, list[int]], None]
    ) -> None:
        """Give ``note`` every servo's goal after a goal write, its position after a read.

        A family that can tell which instructions those are says so (Feetech).
        """

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
            if self.on_position is not None:
                self._note_position(item, now, self.on_position)
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


# ------------------------------------------------------------------ bus_replies
# What both virtual buses' instruction handlers share: replies, who hears, faults.
@dataclass(frozen=True, slots=True)
class Reply:
    """Bytes one servo (or a fast-read chain) sends, after ``delay`` seconds."""

    data: bytes
    delay: float  # [s] return delay time + injected delay, from the previous bus activity


class ListeningServo(Protocol):
    """What deciding who hears the host needs of a simulated servo."""

    @property
    def id(self) -> int:
        """The id the servo answers to now."""
        ...

    @property
    def baudrate(self) -> int | None:
        """The bit rate it listens at [bit/s], ``None`` for an unlisted register value."""
        ...


ListeningT = TypeVar("ListeningT", bound=ListeningServo)


def corrupt(data: bytes) -> bytes:
    """``data`` with its last byte (the checksum or CRC) flipped."""
    return data[:-1] + bytes((data[-1] ^ 0xFF,))


def online(
    servos: Sequence[ListeningT], faults: FaultTable, rate: int | None
) -> dict[int, ListeningT]:
    """Servos that hear a host at ``rate`` [bit/s], by id: present, and at that rate.

    Of two servos with the same id the first one listed answers. An unknown rate
    (``None``) is heard by none.
    """
    out: dict[int, ListeningT] = {}
    if rate is None:
        return out
    for servo in servos:
        record = faults.get(servo.id)
        if record is not None and not record.answers:
            continue
        if servo.baudrate == rate:
            out.setdefault(servo.id, servo)
    return out


def faulted_reply(
    faults: ServoFaults | None, delay: float, encode: Callable[[int | None], bytes]
) -> Reply | None:
    """The reply a servo's injected faults let through, or ``None`` when it is lost.

    Args:
        faults: the servo's injected faults, ``None`` for none.
        delay: the servo's return delay [s].
        encode: the status packet's bytes with its parameters cut to a number of bytes
            (``None``: all of them).
    """
    if faults is None:
        return Reply(encode(None), delay)
    fate = faults.reply_fate()
    if fate is ReplyFate.DROP:
        return None
    data = encode(faults.truncate_keep if fate is ReplyFate.TRUNCATE else None)
    if fate is ReplyFate.CORRUPT:
        data = corrupt(data)
    return Reply(data, delay + faults.delay)


# ------------------------------------------------------------------ server_timing
# Keeping a virtual bus's server thread on time on a busy host.
SERVER_NICE = 5  # how much the server thread raises its priority, where allowed
#: GIL switch interval while a bus runs in this process [s]. A client that busy-polls
#: the port (the stock dynamixel-sdk does) holds the GIL; at Python's default 5 ms the
#: server thread would wake up to 5 ms late for every reply.
SWITCH_INTERVAL = 2e-4


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


class GilTuning:
    """Shorten the GIL switch interval while any bus runs; restore it after the last."""

    _users = 0
    _saved = 0.0
    _lock = threading.Lock()

    @classmethod
    def acquire(cls) -> None:
        """One more bus runs: shorten the interval if it is the first."""
        with cls._lock:
            if cls._users == 0:
                cls._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(cls._saved, SWITCH_INTERVAL))
            cls._users += 1

    @classmethod
    def release(cls) -> None:
        """One bus stopped: restore the interval if it was the last."""
        with cls._lock:
            cls._users -= 1
            if cls._users == 0:
                sys.setswitchinterval(cls._saved)


def raise_priority() -> None:
    """Nice the calling thread up a little: it stands in for hardware that answers in time.

    Lowering a nice value needs CAP_SYS_NICE (root in CI containers); without it the
    thread keeps the default priority.
    """
    with contextlib.suppress(OSError, AttributeError):
        thread = threading.get_native_id()
        os.setpriority(
            os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) - SERVER_NICE
        )


# ------------------------------------------------------------------ eeprom_file
# A virtual bus's EEPROM kept in a file, so that it survives a restart as a servo's does.
FORMAT = 1
#: Overrides where the virtual buses keep their EEPROM files (tests point it at a tmp dir).
STATE_DIR_ENV = "HILBOT_STATE_DIR"


def state_dir() -> Path:
    """The folder of the virtual buses' EEPROM files.

    ``$HILBOT_STATE_DIR``, else ``$XDG_STATE_HOME/hilbot/sim-bus``, else
    ``~/.local/state/hilbot/sim-bus`` (the XDG base directory specification's state folder).
    """
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "hilbot" / "sim-bus"


class EepromServo(Protocol):
    """What keeping EEPROM needs of a simulated servo."""

    def eeprom_image(self) -> bytes:
        """The EEPROM as it would survive power-off."""
        ...

    def restore_eeprom(self, image: bytes) -> None:
        """Power up with ``image`` as the EEPROM."""
        ...


class EepromFile:
    """The EEPROM of a bus's servos, loaded from and saved to ``path``.

    Args:
        path: the file (created with its folder on the first save).
        servos: the bus's servos, in slot order.
        models: their model names, in the same order.
    """

    def __init__(self, path: Path, servos: Sequence[EepromServo], models: Sequence[str]) -> None:
        self.path = Path(path)
        self.servos = list(servos)
        self.models = list(models)
        self._saved: list[bytes] = []

    def load(self) -> list[str]:
        """Restore the servos from the file; return a line per slot left factory-fresh.

        A missing file restores nothing (every servo is factory-fresh). An unreadable one
        is a one-line ``ValueError`` naming it.
        """
        notes: list[str] = []
        entries = self._entries()
        for k, (servo, model) in enumerate(zip(self.servos, self.models, strict=True)):
            entry = entries[k] if k < len(entries) else None
            if entry is None:
                continue
            if entry.get("model") != model:
                notes.append(
                    f"slot {k + 1}: the saved EEPROM is a {entry.get('model')}'s, this servo "
                    f"is a {model}: it starts factory-fresh"
                )
                continue
            try:
                image = bytes.fromhex(str(entry.get("eeprom", "")))
            except ValueError:
                raise ValueError(f"{self.path}: slot {k + 1}'s EEPROM is not hex") from None
            servo.restore_eeprom(image)
        self._saved = [s.eeprom_image() for s in self.servos]
        return notes

    def _entries(self) -> list[dict[str, object]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ValueError(f"{self.path}: cannot read it ({exc.strerror})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{self.path}: not an EEPROM file ({exc.msg})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{self.path}: not an EEPROM file of format {FORMAT}")
        servos = data.get("servos")
        if not isinstance(servos, list):
            raise ValueError(f"{self.path}: not an EEPROM file of format {FORMAT}")
        return [s if isinstance(s, dict) else {} for s in servos]

    def changed(self) -> bool:
        """Whether any servo's EEPROM differs from what was last loaded or saved."""
        return any(
            s.eeprom_image() != saved for s, saved in zip(self.servos, self._saved, strict=False)
        ) or len(self._saved) != len(self.servos)

    def save(self) -> None:
        """Write every servo's EEPROM to the file (atomically)."""
        images = [s.eeprom_image() for s in self.servos]
        data = {
            "format": FORMAT,
            "servos": [
                {"model": m, "eeprom": image.hex()}
                for m, image in zip(self.models, images, strict=True)
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".eeprom-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._saved = images

    def save_if_changed(self) -> bool:
        """``save`` when something changed; whether it saved."""
        if not self.changed():
            return False
        self.save()
        return True


# ------------------------------------------------------------------ plug_in
# Servos plugged in one at a time on a running virtual bus, as in ``lerobot-setup-motors``.
BROADCAST_ID = 0xFE  # both families
PING = 0x01  # both families


class PluggableServo(Protocol):
    """What plugging servos in needs of a simulated servo."""

    @property
    def id(self) -> int:
        """The id it answers to now."""
        ...

    @property
    def baudrate(self) -> int | None:
        """The bit rate it listens at now [bit/s]."""
        ...

    def factory_fresh(self) -> None:
        """Every register at its factory value (id 1, factory bit rate), then power up."""
        ...

    def setting_addresses(self) -> tuple[range, range]:
        """The bytes of its ID register and of its Baud Rate register."""
        ...


class PluggableBus(Protocol):
    """What plugging servos in needs of a virtual bus."""

    @property
    def lock(self) -> threading.RLock:
        """The bus's lock (held while a packet is answered)."""
        ...

    def connect(self, slots: Sequence[int]) -> None:
        """Put exactly the servos of ``slots`` on the wire."""
        ...


class PlugIn:
    """Factory servos plugged in one at a time.

    Args:
        bus: the virtual bus (not necessarily running yet).
        servos: the bus's servos, in slot order.
        order: the slots in the order they are plugged in (LeRobot sets up the last
            motor first: the default is the bus's order reversed).
        labels: a name per slot for the messages (e.g. its joint).
        report: where the messages go (``hilbot sim-bus`` prints them).
    """

    def __init__(
        self,
        bus: PluggableBus,
        servos: Sequence[PluggableServo],
        *,
        order: Sequence[int] | None = None,
        labels: Sequence[str] | None = None,
        report: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.bus = bus
        self.servos = list(servos)
        self.order = list(reversed(range(len(self.servos))) if order is None else order)
        if sorted(self.order) != list(range(len(self.servos))):
            raise ValueError(f"plug-in order {self.order} is not every slot once")
        self.labels = (
            list(labels) if labels is not None else [f"slot {k + 1}" for k in range(len(servos))]
        )
        self.report = report
        self.step = -1  # index in ``order`` of the plugged servo; len(order): all connected
        self._id_written = self._baud_written = False
        #: Set once every servo is connected (the sequence is over).
        self.finished = threading.Event()

    @property
    def slot(self) -> int | None:
        """The slot plugged in now, ``None`` once all are connected."""
        return self.order[self.step] if 0 <= self.step < len(self.order) else None

    @property
    def configured(self) -> bool:
        """Whether the host has written the plugged servo's ID and Baud Rate."""
        return self._id_written and self._baud_written

    def begin(self) -> None:
        """Every servo factory-fresh and unplugged; the first one plugged in."""
        with self.bus.lock:
            for servo in self.servos:
                servo.factory_fresh()
            self.step = -1
            self._plug_next()

    def advance(self) -> None:
        """Unplug the servo on the wire and plug in the next (Enter)."""
        with self.bus.lock:
            if self.slot is not None:
                self._plug_next()

    def before(self, target: int, instruction: int) -> None:
        """A packet for ``target`` arrived: a broadcast PING after a setup plugs the next."""
        if target == BROADCAST_ID and instruction == PING and self.configured:
            self._plug_next()

    def after_write(self, address: int, length: int) -> None:
        """The host wrote ``length`` bytes at ``address`` of the plugged servo."""
        slot = self.slot
        if slot is None:
            return
        written = range(address, address + length)
        id_bytes, baud_bytes = self.servos[slot].setting_addresses()
        # The write of ID went to the servo's old id; it answers to its new one after.
        self._id_written |= bool(set(written) & set(id_bytes))
        self._baud_written |= bool(set(written) & set(baud_bytes))
        if not self.configured:
            return
        servo = self.servos[slot]
        done = f"{self.labels[slot]} is set up: id {servo.id} at {servo.baudrate} bit/s"
        if self.step + 1 < len(self.order):
            self.report(f"{done}; the next search (a broadcast ping) or Enter plugs in the next")
        else:
            self.report(done)
            self._plug_next()  # the last one: the arm is assembled

    def _plug_next(self) -> None:
        self.step += 1
        self._id_written = self._baud_written = False
        slot = self.slot
        if slot is None:
            self.bus.connect(range(len(self.servos)))
            self.report("every servo is connected (the assembled arm)")
            self.finished.set()
            return
        self.bus.connect([slot])
        servo = self.servos[slot]
        self.report(
            f"plugged in: {self.labels[slot]} ({self.step + 1} of {len(self.order)}), a factory "
            f"servo: id {servo.id} at {servo.baudrate} bit/s"
        )
