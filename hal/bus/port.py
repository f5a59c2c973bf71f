"""The serial port of the bus engine: pyserial opens it, reads block in ``select``.

pyserial configures the device (baud rate, raw mode, ``termios2`` for odd rates); the
packets then go straight to the file descriptor. ``os.write`` of a few dozen bytes fits
the kernel buffer, and a read waits in ``select`` until the reply is in or its deadline
passes, so a missing servo costs its deadline of wall time and no CPU (the vendor SDK's
``PortHandler`` polls ``read`` in a loop with ``timeout=0``, as dynamixel-sdk's does).

Where ``select`` takes sockets only (Windows), or with ``HILBOT_PORT_WAIT=pyserial``, the
port waits through pyserial instead: ``Serial.timeout`` is set to the time left to the
deadline and ``Serial.read(n)`` waits (:class:`~hilbot.hal.dynamixel.port.PortWait`).
"""

from __future__ import annotations

import os
import select
import time

import serial

from hilbot.hal.dynamixel.port import (
    PYSERIAL_WRITE_TIMEOUT,
    PortWait,
    port_wait,
    pyserial_timeout,
    serial_errors,
)
from hilbot.hal.errors import PortError


class SerialPort:
    """One open serial device. Not thread-safe: the bus thread owns it.

    Args:
        port: device path, e.g. ``/dev/ttyACM0``, ``COM3`` or a virtual bus's pty.
        baudrate: [bit/s].
        wait: how reads wait for bytes; ``port_wait()`` (``HILBOT_PORT_WAIT``, else by
            platform) when ``None``.
    """

    def __init__(self, port: str, baudrate: int, *, wait: PortWait | None = None) -> None:
        self.name = port
        self.baudrate = baudrate
        self.wait = port_wait() if wait is None else wait
        self._pyserial = self.wait is PortWait.PYSERIAL
        self._errors = serial_errors()
        self._serial: serial.Serial | None = None
        self._fd = -1

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

    def write(self, data: bytes) -> None:
        """Write all of ``data``.

        Raises:
            PortError: the device failed or is closed.
        """
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
