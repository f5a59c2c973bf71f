"""The engine's serial ports: pyserial opens them, reads wait on the wire's clock.

:class:`SerialPort` is the port both families' buses frame their own packets on;
:class:`BlockingPortHandler` is a dynamixel-sdk ``PortHandler`` doing its I/O through one,
for code that drives the SDK itself.

Two measured problems of the stock ``dynamixel_sdk.PortHandler`` are fixed here:

* It opens the port with ``timeout=0`` and the packet handlers call
  ``readPort`` in a tight loop until the packet is complete or the timeout
  passes: 35 ms of CPU burnt in a 35 ms timeout. :meth:`BlockingPortHandler.readPort`
  waits in ``select`` on the file descriptor until bytes arrive or the packet
  deadline passes, so waiting costs no CPU.
* Its packet timeout is ``bytes x byte time + 2 x 16 ms + 2 ms``: the 16 ms
  ``LATENCY_TIMER`` term is the FTDI default latency, paid twice, even where
  the adapter's latency timer is 1 ms (or on a pseudo-terminal), so one missing
  servo stalls a read ~35 ms. Here the timeout is ``bytes x byte time + the
  adapter's latency timer + margin`` (a few ms).

It also measures time with ``time.monotonic`` (the stock handler uses wall-clock
``time.time``, which jumps when NTP adjusts the clock).

How a read waits (:class:`PortWait`, shared with the Feetech port): ``select`` on the
file descriptor, the tuned default on Linux and macOS, or pyserial's own timeout
(``Serial.timeout`` set to the time left to the packet deadline, then ``read(n)``),
which works where ``select`` takes sockets only: the default on Windows. The
environment variable ``HILBOT_PORT_WAIT`` (``select`` or ``pyserial``) picks one for
every port a process opens; tests use it to drive the pyserial wait on Linux.
"""

from __future__ import annotations

import enum
import logging
import os
import select
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import serial
from dynamixel_sdk import PortHandler

from hilbot.hal.errors import ConfigError, PortError

log = logging.getLogger(__name__)

#: Extra time [ms] allowed beyond the reply's wire time: OS scheduling and
#: the servo's own processing (X series answer within ~0.1 ms after their return delay).
DEFAULT_MARGIN_MS = 3.0

#: Baud rates the SDK knows how to configure (``PortHandler.getCFlagBaud``),
#: plus 4.5 Mbps which pyserial sets through termios2 on Linux.
_EXTRA_BAUD = (4_500_000,)

#: The environment variable that picks how ports wait for bytes (:func:`port_wait`).
PORT_WAIT_ENV = "HILBOT_PORT_WAIT"

#: [s] Shortest pyserial timeout of the pyserial wait: Windows counts read timeouts in
#: whole milliseconds (``COMMTIMEOUTS``), and a 0 there would mean "no timeout at all".
MIN_PYSERIAL_WAIT = 0.001

#: [s] Bound on a blocking pyserial write (a packet of a few hundred bytes is out in
#: 0.3 s even at 9600 bit/s); a stuck adapter driver then fails instead of hanging.
PYSERIAL_WRITE_TIMEOUT = 1.0


class PortWait(enum.Enum):
    """How a port waits for the bytes of a reply."""

    SELECT = "select"  # select() on the file descriptor, os.read/os.write (POSIX)
    PYSERIAL = "pyserial"  # Serial.timeout = time left to the deadline, Serial.read(n)


def port_wait(environ: Mapping[str, str] | None = None, platform: str | None = None) -> PortWait:
    """The wait ``HILBOT_PORT_WAIT`` asks for, else pyserial's on Windows and select elsewhere.

    Raises:
        ConfigError: the variable names no wait, or ``select`` on Windows.
    """
    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    text = env.get(PORT_WAIT_ENV, "").strip().lower()
    if not text:
        return PortWait.PYSERIAL if platform == "win32" else PortWait.SELECT
    try:
        wait = PortWait(text)
    except ValueError:
        raise ConfigError(
            f"{PORT_WAIT_ENV}={text!r}: expected one of " + ", ".join(w.value for w in PortWait),
            field=PORT_WAIT_ENV,
        ) from None
    if wait is PortWait.SELECT and platform == "win32":
        raise ConfigError(
            f"{PORT_WAIT_ENV}=select waits on file descriptors (POSIX); not available on "
            f"{platform}: use {PortWait.PYSERIAL.value}",
            field=PORT_WAIT_ENV,
        )
    return wait


def pyserial_timeout(remaining: float) -> float:
    """The ``Serial.timeout`` [s] for ``remaining`` seconds to a deadline (0: do not wait)."""
    return max(remaining, MIN_PYSERIAL_WAIT) if remaining > 0 else 0.0


def serial_errors() -> tuple[type[Exception], ...]:
    """What a pyserial call on an open port raises when the device fails.

    ``termios.error`` too where pyserial uses termios (POSIX; its flushes raise it),
    imported here, not at module level, so that the module imports on Windows.
    """
    try:
        import termios
    except ImportError:
        return (serial.SerialException, OSError)
    return (serial.SerialException, termios.error, OSError)


def latency_timer_ms(port: str) -> int | None:
    """The USB adapter's latency timer [ms] from Linux sysfs (FTDI only), or ``None``.

    ``/dev/ttyUSB0`` -> ``/sys/bus/usb-serial/devices/ttyUSB0/latency_timer``.
    Symlinks such as ``/dev/serial/by-id/...`` are resolved first.
    """
    try:
        tty = Path(port).resolve().name
        text = Path(f"/sys/bus/usb-serial/devices/{tty}/latency_timer").read_text()
        return int(text.strip())
    except (OSError, ValueError):
        return None


class BlockingPortHandler(PortHandler):  # type: ignore[misc]  # the SDK is untyped
    """Drop-in ``PortHandler`` whose reads block in ``select`` until the packet deadline.

    Args:
        port_name: serial device, e.g. ``/dev/ttyUSB0`` or a pty path.
        margin_ms: extra time beyond the wire time of a reply.
        latency_ms: the USB adapter latency to allow for; read from sysfs when ``None``.
        wait: how reads wait for bytes; :func:`port_wait` (``HILBOT_PORT_WAIT``, else
            by platform) when ``None``.
    """

    def __init__(
        self,
        port_name: str,
        *,
        margin_ms: float = DEFAULT_MARGIN_MS,
        latency_ms: float | None = None,
        wait: PortWait | None = None,
    ) -> None:
        super().__init__(port_name)
        self.wait = port_wait() if wait is None else wait
        self._pyserial = self.wait is PortWait.PYSERIAL
        self._errors = serial_errors()
        self.margin_ms = margin_ms
        found = latency_timer_ms(port_name) if latency_ms is None else latency_ms
        self.latency_ms = float(found or 0.0)
        self.reply_delay_ms = 0.0  # return delay of the slowest servo, set by the bus
        self._deadline = 0.0  # [s] monotonic
        self._tx_until = 0.0  # [s] monotonic: when the bytes written so far are off the wire
        self._port: SerialPort | None = None

    # --- opening ---------------------------------------------------------------------

    def getCFlagBaud(self, baudrate: int) -> int:
        """Accept the SDK's rates plus 4.5 Mbps."""
        if baudrate in _EXTRA_BAUD:
            return baudrate
        result: int = super().getCFlagBaud(baudrate)
        return result

    def setupPort(self, cflag_baud: int) -> bool:
        """Open the port like the SDK does, translating failures to :class:`PortError`."""
        try:
            ok: bool = super().setupPort(cflag_baud)
            if self._pyserial:  # the SDK opens with no write timeout: a write could hang
                self.ser.write_timeout = PYSERIAL_WRITE_TIMEOUT
        except (serial.SerialException, OSError, ValueError) as exc:
            self.is_open = False
            raise PortError(f"cannot open {self.port_name}: {exc}", port=self.port_name) from exc
        return ok

    # --- timing ----------------------------------------------------------------------

    def getCurrentTime(self) -> float:
        """Monotonic time in [ms] (the SDK's unit)."""
        return time.monotonic() * 1000.0

    def setPacketTimeout(self, packet_length: int) -> None:
        """Deadline for a reply of ``packet_length`` bytes: wire time + latency + margin.

        Counted from when the instruction (and anything written before it, such as a
        sync write, which has no reply) has left the adapter, not from now.
        """
        self.packet_start_time = max(self.getCurrentTime(), self._tx_until * 1000.0)
        self.packet_timeout = (
            self.tx_time_per_byte * packet_length
            + self.latency_ms
            + self.reply_delay_ms
            + self.margin_ms
        )
        self._deadline = (self.packet_start_time + self.packet_timeout) / 1000.0

    def setPacketTimeoutMillis(self, msec: float) -> None:
        """Deadline ``msec`` from now."""
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = msec
        self._deadline = (self.packet_start_time + msec) / 1000.0

    def set_deadline(self, seconds_from_now: float) -> None:
        """Set the packet deadline directly (used by the bus's own group reads)."""
        self.setPacketTimeoutMillis(seconds_from_now * 1000.0)

    @property
    def tx_until(self) -> float:
        """When the bytes written so far have left the adapter at the baud rate [s, monotonic]."""
        return self._tx_until

    @property
    def deadline(self) -> float:
        """The current packet deadline, ``time.monotonic()`` seconds."""
        return self._deadline

    # --- reading and writing: the engine's port on the SDK's serial object -------------

    def _io(self) -> SerialPort:
        """The :class:`SerialPort` doing this handler's I/O on its current ``ser``."""
        port = self._port
        if port is None or port._serial is not self.ser:
            port = self._port = SerialPort.adopt(self.ser, self.port_name, wait=self.wait)
        return port

    def readPort(self, length: int) -> bytes:
        """Return up to ``length`` bytes, blocking until all arrive or the deadline passes.

        Returns whatever arrived by the deadline (possibly nothing); the caller's
        ``isPacketTimeout`` check then ends its loop without spinning.
        """
        return self._io().read(length, self._deadline)

    def clearPort(self) -> None:
        """Drop unread input (one ``select`` with no timeout when nothing waits)."""
        self._io().discard_waiting()

    def read_available(self, timeout: float) -> bytes:
        """Block up to ``timeout`` [s] for any bytes, then return all that are waiting."""
        return self._io().read_available(timeout)

    def writePort(self, packet: bytes | list[int]) -> int:
        """Write a packet straight to the file descriptor; :class:`PortError` on failure.

        pyserial's ``write`` spends ~0.3 ms of Python per call on timeout bookkeeping;
        a packet of a few dozen bytes fits the kernel buffer, so one ``os.write`` does.
        (The pyserial wait writes through pyserial: Windows has no file descriptor.)
        """
        data = bytes(packet)
        # tx_time_per_byte [ms] is set with the baud rate; a real adapter sends queued bytes
        # one after the other, so a reply cannot start before all of them are out.
        start = max(time.monotonic(), self._tx_until)
        self._tx_until = start + len(data) * self.tx_time_per_byte / 1000.0
        self._io().write(data)
        return len(data)


class SerialPort:
    """One open serial device. Not thread-safe: the bus thread owns it.

    Args:
        port: device path, e.g. ``/dev/ttyACM0``, ``COM3`` or a virtual bus's pty.
        baudrate: [bit/s].
        wait: how reads wait for bytes; ``port_wait()`` (``HILBOT_PORT_WAIT``, else by
            platform) when ``None``.
        margin_ms: reply slack [ms] beyond the wire time, for the bus's deadlines.
        latency_ms: the USB adapter's latency [ms]; read from sysfs when ``None``.
    """

    def __init__(
        self,
        port: str,
        baudrate: int,
        *,
        wait: PortWait | None = None,
        margin_ms: float = DEFAULT_MARGIN_MS,
        latency_ms: float | None = 0.0,
    ) -> None:
        self.name = port
        self.baudrate = baudrate
        self.wait = port_wait() if wait is None else wait
        self.margin_ms = margin_ms
        found = latency_timer_ms(port) if latency_ms is None else latency_ms
        self.latency_ms = float(found or 0.0)
        self._pyserial = self.wait is PortWait.PYSERIAL
        self._errors = serial_errors()
        self._serial: serial.Serial | None = None
        self._fd = -1
        self._tx_until = 0.0  # [s] monotonic: when the bytes written so far are off the wire

    @property
    def tx_until(self) -> float:
        """When the bytes written so far have left the adapter at the baud rate [s, monotonic].

        A real adapter sends queued bytes one after the other, so a reply cannot start
        before all of them are out: a read right behind a sync write waits for both.
        """
        return self._tx_until

    @classmethod
    def adopt(cls, ser: serial.Serial, name: str, *, wait: PortWait | None = None) -> SerialPort:
        """A port doing its I/O on ``ser``, a device opened elsewhere (the SDK's handler)."""
        port = cls(name, int(ser.baudrate or 1), wait=wait)
        port._serial = ser
        if not port._pyserial:
            port._fd = ser.fileno()
        return port

    @property
    def is_open(self) -> bool:
        """Whether the device is open."""
        return self._serial is not None

    def open(self) -> None:
        """Open the device at the baud rate.

        Raises:
            PortError: it cannot be opened or the baud rate set.
        """
        # The pyserial wait writes through pyserial, blocking up to a bound; the select
        # wait writes to the file descriptor itself.
        write_timeout = PYSERIAL_WRITE_TIMEOUT if self._pyserial else 0
        try:
            self._serial = serial.Serial(
                self.name, self.baudrate, timeout=0, write_timeout=write_timeout
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise PortError(f"cannot open {self.name}: {exc}", port=self.name) from exc
        if not self._pyserial:  # Windows' pyserial has no file descriptor
            self._fd = self._serial.fileno()

    def close(self) -> None:
        """Close the device (idempotent)."""
        if self._serial is not None:
            self._serial.close()
            self._serial = None
            self._fd = -1

    def set_baudrate(self, baudrate: int) -> None:
        """Switch the host side to ``baudrate`` [bit/s]."""
        if self._serial is None:
            raise PortError(f"{self.name} is not open", port=self.name)
        try:
            self._serial.baudrate = baudrate
        except (serial.SerialException, OSError, ValueError) as exc:
            raise PortError(f"{self.name}: baud rate {baudrate}: {exc}", port=self.name) from exc
        self.baudrate = baudrate

    def reply_deadline(self, reply_bytes: int, delays: float = 0.0) -> float:
        """When a reply of ``reply_bytes`` to what was just written must be in [s, monotonic].

        The wire clock: from when the bytes written so far left the adapter, the reply's
        wire time, the servos' return ``delays`` [s], the adapter's latency and the margin.
        """
        wire = reply_bytes * 10.0 / self.baudrate + (self.latency_ms + self.margin_ms) / 1000.0
        return max(time.monotonic(), self._tx_until) + wire + delays

    def write(self, data: bytes) -> None:
        """Write all of ``data``.

        Raises:
            PortError: the device failed or is closed.
        """
        start = max(time.monotonic(), self._tx_until)
        self._tx_until = start + len(data) * 10.0 / self.baudrate
        if self._pyserial:
            self._write_pyserial(data)
            return
        fd, written = self._fd, 0
        try:
            while written < len(data):
                try:
                    written += os.write(fd, data[written:])
                except BlockingIOError:
                    select.select([], [fd], [], 0.1)
        except OSError as exc:
            raise PortError(f"write to {self.name} failed: {exc}", port=self.name) from exc

    def read(self, length: int, deadline: float) -> bytes:
        """Up to ``length`` bytes, blocking until all arrived or ``deadline`` (monotonic) passed.

        Raises:
            PortError: the device failed or its other end closed.
        """
        if self._pyserial:
            return self._read_pyserial(length, deadline)
        out = bytearray()
        fd = self._fd
        while len(out) < length:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                break
            try:
                chunk = os.read(fd, length - len(out))
            except BlockingIOError:
                continue
            except OSError as exc:
                raise PortError(f"read from {self.name} failed: {exc}", port=self.name) from exc
            if not chunk:
                raise PortError(f"{self.name} closed", port=self.name)
            out += chunk
        return bytes(out)

    def read_available(self, timeout: float) -> bytes:
        """Block up to ``timeout`` [s] for any bytes, then return all that are waiting.

        Raises:
            PortError: the device failed or its other end closed.
        """
        if self._pyserial:
            return self._available_pyserial(timeout)
        fd = self._fd
        if not select.select([fd], [], [], max(timeout, 0.0))[0]:
            return b""
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return b""
        except OSError as exc:
            raise PortError(f"read from {self.name} failed: {exc}", port=self.name) from exc
        if not chunk:
            raise PortError(f"{self.name} closed", port=self.name)
        return chunk

    def discard_waiting(self) -> int:
        """Drop the bytes already waiting (a late reply to an earlier instruction); how many.

        One ``select`` with no timeout when nothing waits, the usual case: a late reply
        left in the buffer would be read as the start of the next one.
        """
        if self._pyserial:
            return self._drain_pyserial(0.0)
        fd, dropped = self._fd, 0
        try:
            while select.select([fd], [], [], 0.0)[0]:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise PortError(f"{self.name} closed", port=self.name)
                dropped += len(chunk)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise PortError(f"read from {self.name} failed: {exc}", port=self.name) from exc
        return dropped

    def drain(self, quiet: float) -> int:
        """Drop input until the line has been quiet for ``quiet`` [s]; the bytes dropped.

        Raises:
            PortError: the device failed or its other end closed.
        """
        if self._pyserial:
            return self._drain_pyserial(quiet)
        dropped = 0
        fd = self._fd
        try:
            while select.select([fd], [], [], quiet)[0]:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise PortError(f"{self.name} closed", port=self.name)
                dropped += len(chunk)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise PortError(f"read from {self.name} failed: {exc}", port=self.name) from exc
        return dropped

    # --- the pyserial wait (Windows; HILBOT_PORT_WAIT=pyserial) ------------------------

    def _open_serial(self) -> serial.Serial:
        if self._serial is None:
            raise PortError(f"{self.name} is not open", port=self.name)
        return self._serial

    def _write_pyserial(self, data: bytes) -> None:
        ser = self._open_serial()
        try:
            ser.write(data)
        except self._errors as exc:
            raise PortError(f"write to {self.name} failed: {exc}", port=self.name) from exc

    def _read_pyserial(self, length: int, deadline: float) -> bytes:
        ser, out = self._open_serial(), bytearray()
        try:
            while len(out) < length:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                # Windows may end the wait a fraction of a millisecond early (whole ms):
                # the loop then waits out the rest instead of returning before the deadline.
                ser.timeout = pyserial_timeout(remaining)
                out += ser.read(length - len(out))
        except self._errors as exc:
            raise PortError(f"read from {self.name} failed: {exc}", port=self.name) from exc
        return bytes(out)

    def _available_pyserial(self, timeout: float) -> bytes:
        """:meth:`read_available` through pyserial's timeout."""
        ser, deadline = self._open_serial(), time.monotonic() + timeout
        try:
            first = b""
            while not first:
                waiting = ser.in_waiting
                if waiting:
                    return bytes(ser.read(waiting))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return b""
                ser.timeout = pyserial_timeout(remaining)
                first = ser.read(1)
            waiting = ser.in_waiting
            return bytes(first + ser.read(waiting)) if waiting else bytes(first)
        except self._errors as exc:
            raise PortError(f"read from {self.name} failed: {exc}", port=self.name) from exc

    def _drain_pyserial(self, quiet: float) -> int:
        """Drop what is waiting, then anything more that comes within ``quiet`` [s] of it."""
        ser, dropped = self._open_serial(), 0
        try:
            while True:
                waiting = ser.in_waiting
                if waiting:
                    dropped += len(ser.read(waiting))
                    continue
                if quiet <= 0:
                    return dropped
                ser.timeout = pyserial_timeout(quiet)
                chunk = ser.read(1)
                if not chunk:
                    return dropped
                dropped += len(chunk)
        except self._errors as exc:
            raise PortError(f"read from {self.name} failed: {exc}", port=self.name) from exc
