"""Expected errors of the command line, told in one line: what failed and what to do.

``hilbot`` never shows a traceback for an error a user can cause or fix (a bad config,
a missing serial port, a broker that is not there): :func:`describe` turns it into one
line and an exit status, 2 for bad input (nothing was started), 1 for a failure while
running. Unexpected exceptions (bugs) keep their traceback.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any, NamedTuple

from hilbot._compat import BaseExceptionGroup

EXIT_FAILED = 1  # the command started and then failed
EXIT_BAD_INPUT = 2  # options, config or environment were wrong; nothing was started


class Failure(NamedTuple):
    """An expected error as the terminal shows it: one line and an exit status."""

    message: str
    exit_code: int


def describe(exc: BaseException) -> Failure | None:
    """One line and an exit status for an expected error; ``None`` for a bug.

    An ``ExceptionGroup`` (from a ``TaskGroup``) is described by its first leaf when
    every leaf is expected.
    """
    if isinstance(exc, BaseExceptionGroup):
        leaves = [describe(e) for e in exc.exceptions]
        if not leaves or any(leaf is None for leaf in leaves):
            return None
        return leaves[0]
    from hilbot.driver.runtime.errors import (
        ConfigError,
        DriverError,
        InvalidTarget,
        TrajectoryError,
    )
    from hilbot.hal.errors import ConfigError as HalConfigError
    from hilbot.hal.errors import HalError, PortError

    message = _one_line(str(exc) or type(exc).__name__)
    if isinstance(exc, PortError):
        return Failure(port_problem(exc.port, reason_of(exc)), EXIT_BAD_INPUT)
    if isinstance(exc, ConfigError | HalConfigError):
        return Failure(f"bad config: {message}", EXIT_BAD_INPUT)
    if isinstance(exc, TrajectoryError | InvalidTarget | FileNotFoundError | IsADirectoryError):
        return Failure(message, EXIT_BAD_INPUT)
    if isinstance(exc, DriverError | HalError | OSError | TimeoutError):
        return Failure(message, EXIT_FAILED)
    if type(exc).__module__.split(".")[0] == "aiomqtt":  # MqttError: the broker, not a bug
        return Failure(f"MQTT broker: {message}", EXIT_FAILED)
    return None


def message_of(exc: BaseException) -> str:
    """The one line :func:`describe` gives ``exc``; its own text, on one line, for others.

    For a command's own ``except`` clauses, which choose the exit status themselves (one
    that catches ``ValueError`` from option parsing knows it is no bug).
    """
    failure = describe(exc)
    return failure.message if failure is not None else _one_line(str(exc) or type(exc).__name__)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def reason_of(exc: BaseException) -> str:
    """The OS's words for why a port failed, without the SDK's repetitions."""
    cause = exc.__cause__
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, OSError) and isinstance(cause.errno, int) and cause.errno > 0:
        return os.strerror(cause.errno)  # pyserial's strerror repeats the port and errno
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    text = _one_line(str(cause if cause is not None else exc))
    return text.rsplit("] ", 1)[-1] if "] " in text else text


def candidate_ports() -> list[str]:
    """Serial ports this machine has now (pyserial's ``list_ports``), USB adapters first."""
    try:
        from serial.tools import list_ports
    except ImportError:  # pragma: no cover - pyserial is a dependency of the HAL
        return []
    ports = list(list_ports.comports())
    ports.sort(key=lambda p: (p.vid is None, p.device))  # USB adapters carry a vendor id
    return [p.device for p in ports]


#: What to do about a port that cannot be opened, for commands that take a config.
PORT_FIX = (
    "give the right one with --port or in the config's buses (`hilbot scan --port PORT` "
    "checks that servos answer there)"
)


def port_problem(port: str, reason: str, origin: str | None = None, fix: str = PORT_FIX) -> str:
    """Say that ``port`` cannot be opened, where it came from, which ports exist, the fix."""
    found = candidate_ports()
    where = f" (from {origin})" if origin else ""
    ports = (
        f"serial ports here: {', '.join(found)}"
        if found
        else "no serial port found: is the adapter plugged in and powered?"
    )
    return f"cannot open the serial port {port}{where}: {reason}; {ports}; {fix}"


#: The port of ``--view`` when ``--view-port`` is not given.
DEFAULT_VIEW_PORT = 8080


def add_view_port(parser: Any) -> None:
    """Add ``--view-port`` (``None`` unless given, so that one without ``--view`` is told)."""
    parser.add_argument(
        "--view-port",
        type=int,
        metavar="PORT",
        help=f"port of --view (default {DEFAULT_VIEW_PORT}; 0: any free one)",
    )


def view_port_problem(args: Any) -> str | None:
    """The refusal of a ``--view-port`` given without ``--view``, if it was."""
    if getattr(args, "view_port", None) is not None and not getattr(args, "view", False):
        return "--view-port is the port of --view; add --view (or drop --view-port)"
    return None


def view_port(args: Any) -> int:
    """The port ``--view`` serves on."""
    port: int | None = getattr(args, "view_port", None)
    return DEFAULT_VIEW_PORT if port is None else port


def positive_seconds(text: str) -> float:
    """``argparse`` type of a duration [s]: a finite number above zero."""
    return _positive(text, "s")


def positive_hz(text: str) -> float:
    """``argparse`` type of a rate [Hz]: a finite number above zero."""
    return _positive(text, "Hz")


def positive_number(text: str) -> float:
    """``argparse`` type of a size or step: a finite number above zero."""
    return _positive(text, "")


def _positive(text: str, unit: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0.0):
        suffix = f" [{unit}]" if unit else ""
        raise argparse.ArgumentTypeError(f"must be a finite number above 0{suffix}, got {text}")
    return value
