"""The local e-stop of ``hilbot run``: a key in its terminal and a signal, never through MQTT.

- **Keys** (when stdin is the terminal ``hilbot run`` runs in, in the foreground):
  space or ``e`` e-stops, ``c`` resets (as in the jog terminal, ``hilbot teleop
  --pattern jog``, where ``r`` jogs up). The terminal is put in cbreak mode (keys
  arrive one by one, unechoed; Ctrl+C still interrupts) and restored on exit.
- **Signal**: ``SIGUSR1`` e-stops (``kill -USR1 <pid>``), from another terminal or a
  watchdog script. SIGINT, SIGTERM and SIGHUP stay the shutdown signals.

Both send ``Command.ESTOP`` straight to the runtime, which latches it exactly as an
MQTT ``estop`` (hold or torque off per ``safety.estop_action``) until ``reset``.
POSIX-only modules (``termios``, ``tty``) are imported only where they exist, so the
module imports on Windows, where only the signal-less parts are active.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from types import TracebackType
from typing import Any, Protocol, TextIO

from hilbot._compat import Self
from hilbot.driver.runtime.state import Command

#: Keys of the local e-stop and what they send.
KEYS: dict[str, Command] = {" ": Command.ESTOP, "e": Command.ESTOP, "c": Command.RESET}
#: The signal that e-stops (``None`` where the platform has none, e.g. Windows).
ESTOP_SIGNAL: signal.Signals | None = getattr(signal, "SIGUSR1", None)
HINT = "local e-stop: space or e (or kill -USR1 {pid}); c resets"

log = logging.getLogger("hilbot.driver.run")


class Commandable(Protocol):
    """What the local e-stop needs of a runtime."""

    async def command(self, cmd: Command | str) -> None:
        """Run a lifecycle command."""


class LocalStop:
    """Feed e-stop keys and ``SIGUSR1`` to a runtime while inside ``async with``.

    Args:
        runtime: takes ``command(Command.ESTOP)`` and ``command(Command.RESET)``.
        stdin: the terminal to read keys from; keys are off when it is not a TTY or
            this process is not in its foreground.
        keys: read keys at all (``False``: the signal only).
    """

    def __init__(
        self, runtime: Commandable, *, stdin: TextIO | None = None, keys: bool = True
    ) -> None:
        self._runtime = runtime
        self._stdin = stdin if stdin is not None else sys.stdin
        self._want_keys = keys
        self._fd: int | None = None
        self._saved: Any = None  # the terminal's termios attributes, restored on exit
        self._signal = False
        self._tasks: set[asyncio.Task[None]] = set()
        #: What the local e-stop did, newest last: ``(source, command)``.
        self.events: list[tuple[str, Command]] = []

    @property
    def keys_active(self) -> bool:
        """Whether keys in the terminal are read."""
        return self._fd is not None

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        if ESTOP_SIGNAL is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(ESTOP_SIGNAL, self.trigger, ESTOP_SIGNAL.name)
                self._signal = True
        if self._want_keys:
            self._start_keys(loop)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        if self._signal and ESTOP_SIGNAL is not None:
            loop.remove_signal_handler(ESTOP_SIGNAL)
            self._signal = False
        self._stop_keys(loop)
        for task in list(self._tasks):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task

    def trigger(self, source: str, command: Command = Command.ESTOP) -> None:
        """Send ``command`` to the runtime now (from a signal handler or a key)."""
        self.events.append((source, command))
        task = asyncio.get_running_loop().create_task(self._send(source, command))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, source: str, command: Command) -> None:
        try:
            await self._runtime.command(command)
        except Exception as err:  # refused (e.g. reset while armed): say so, keep running
            log.warning("local %s (%s) refused: %s", command.value, source, err)
            return
        if command is Command.ESTOP:
            log.warning("local e-stop (%s): e-stopped; key c or cmd reset clears it", source)
        else:
            log.warning("local %s (%s) done", command.value, source)

    # -- keys ---------------------------------------------------------------------------------
    def _start_keys(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            import termios
            import tty
        except ImportError:  # Windows: no terminal modes; the signal is not there either
            return
        try:
            fd = self._stdin.fileno()
            if not os.isatty(fd) or not _in_foreground(fd):
                return  # not a terminal, or a background job (tcsetattr would stop us)
            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        except (OSError, ValueError, termios.error):
            return
        try:
            loop.add_reader(fd, self._on_readable, fd)
        except (NotImplementedError, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, self._saved)
            return
        self._fd = fd

    def _stop_keys(self, loop: asyncio.AbstractEventLoop) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        import termios

        loop.remove_reader(fd)
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, self._saved)

    def _on_readable(self, fd: int) -> None:
        try:
            data = os.read(fd, 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the terminal went away: stop reading it
            asyncio.get_running_loop().remove_reader(fd)
            return
        for char in data.decode(errors="replace").lower():
            command = KEYS.get(char)
            if command is not None:
                self.trigger("key " + ("space" if char == " " else repr(char)), command)


def _in_foreground(fd: int) -> bool:
    """Whether this process may change the terminal ``fd`` (a background job may not)."""
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:  # a terminal that is not our controlling one: no job control applies
        return True
