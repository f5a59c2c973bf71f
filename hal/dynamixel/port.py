"""A dynamixel-sdk ``PortHandler`` that blocks while it waits and times out on the wire's clock.

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
"""

from __future__ import annotations

import logging
import os
import select
import termios
import time
from pathlib import Path

import serial
from dynamixel_sdk import PortHandler

from hilbot.hal.errors import PortError

log = logging.getLogger(__name__)

#: Extra time [ms] allowed beyond the reply's wire time: OS scheduling and
#: the servo's own processing (X series answer within ~0.1 ms after their return delay).
DEFAULT_MARGIN_MS = 3.0

#: Baud rates the SDK knows how to configure (``PortHandler.getCFlagBaud``),
#: plus 4.5 Mbps which pyserial sets through termios2 on Linux.
_EXTRA_BAUD = (4_500_000,)


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
    """

    def __init__(
        self,
        port_name: str,
        *,
        margin_ms: float = DEFAULT_MARGIN_MS,
        latency_ms: float | None = None,
    ) -> None:
        super().__init__(port_name)
        self.margin_ms = margin_ms
        found = latency_timer_ms(port_name) if latency_ms is None else latency_ms
        self.latency_ms = float(found or 0.0)
        self.reply_delay_ms = 0.0  # return delay of the slowest servo, set by the bus
        self._deadline = 0.0  # [s] monotonic
        self._tx_until = 0.0  # [s] monotonic: when the bytes written so far are off the wire

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

    # --- reading ---------------------------------------------------------------------

    def readPort(self, length: int) -> bytes:
        """Return up to ``length`` bytes, blocking until all arrive or the deadline passes.

        Returns whatever arrived by the deadline (possibly nothing); the caller's
        ``isPacketTimeout`` check then ends its loop without spinning.
        """
        out = bytearray()
        fd = self.ser.fileno()
        while len(out) < length:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                break
            try:
                chunk = os.read(fd, length - len(out))
            except BlockingIOError:
                continue
            except OSError as exc:
                raise PortError(
                    f"read from {self.port_name} failed: {exc}", port=self.port_name
                ) from exc
            if not chunk:  # EOF: the other end of a pty closed
                raise PortError(f"{self.port_name} closed", port=self.port_name)
            out += chunk
        return bytes(out)

    def clearPort(self) -> None:
        """Drop unread input, translating a dead port's error to :class:`PortError`.

        The flush (``tcflush``) is skipped when nothing is waiting: it is a syscall that
        took ~0.1 ms on a pseudo-terminal here, before every read instruction, on the
        cycle's critical path, while in the usual cycle there is nothing to drop. A
        reply still in flight is not caught by either (see ``DynamixelBus._drain``).
        """
        try:
            if not select.select([self.ser.fileno()], [], [], 0.0)[0]:
                return
            self.ser.reset_input_buffer()
        except (serial.SerialException, termios.error, OSError) as exc:
            raise PortError(f"{self.port_name} failed: {exc}", port=self.port_name) from exc

    def read_available(self, timeout: float) -> bytes:
        """Block up to ``timeout`` [s] for any bytes, then return all that are waiting."""
        fd = self.ser.fileno()
        ready, _, _ = select.select([fd], [], [], max(timeout, 0.0))
        if not ready:
            return b""
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return b""
        except OSError as exc:
            raise PortError(
                f"read from {self.port_name} failed: {exc}", port=self.port_name
            ) from exc
        if not chunk:
            raise PortError(f"{self.port_name} closed", port=self.port_name)
        return chunk

    def writePort(self, packet: bytes | list[int]) -> int:
        """Write a packet straight to the file descriptor; :class:`PortError` on failure.

        pyserial's ``write`` spends ~0.3 ms of Python per call on timeout bookkeeping;
        a packet of a few dozen bytes fits the kernel buffer, so one ``os.write`` does.
        """
        data = bytes(packet)
        fd = self.ser.fileno()
        written = 0
        # tx_time_per_byte [ms] is set with the baud rate; a real adapter sends queued bytes
        # one after the other, so a reply cannot start before all of them are out.
        start = max(time.monotonic(), self._tx_until)
        self._tx_until = start + len(data) * self.tx_time_per_byte / 1000.0
        try:
            while written < len(data):
                try:
                    written += os.write(fd, data[written:])
                except BlockingIOError:
                    select.select([], [fd], [], 0.1)
        except OSError as exc:
            raise PortError(
                f"write to {self.port_name} failed: {exc}", port=self.port_name
            ) from exc
        return written
