"""How a teleop command that failed is told: one line naming the command and the reason.

Every command that arrives over MQTT ends with exactly one outcome, whatever the
runtime raised: success, or this line on the ``error`` topic. An expected error (a
refusal, a bus error: see :func:`hilbot.driver.commands.failures.describe`) is its
message; anything else is a bug, told in one line too and logged with its traceback
once, by whoever first catches it.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from hilbot.driver.commands.failures import describe


class CommandFailure(NamedTuple):
    """A failed command as the ``error`` topic tells it.

    Attributes:
        detail: one line, ``"<command>: <reason>"``.
        expected: a refusal or a bus error, not a bug.
    """

    detail: str
    expected: bool


def command_failure(command: str, exc: BaseException) -> CommandFailure:
    """The one line ``command`` failing with ``exc`` reports, and whether that was expected.

    ``ValueError`` (not a command) and ``RuntimeError`` (the runtime has stopped) are
    refusals too. A reason that already names the command (passed on by the teleop
    worker) is kept as it is.
    """
    failure = describe(exc)
    expected = failure is not None or isinstance(exc, ValueError | RuntimeError)
    text = failure.message if failure is not None else " ".join(str(exc).split())
    if failure is None and not isinstance(exc, ValueError | RuntimeError):
        text = f"internal error: {type(exc).__name__}: {text}" if text else type(exc).__name__
    if not text.startswith(f"{command}:"):
        text = f"{command}: {text or type(exc).__name__}"
    return CommandFailure(text, expected)


def report_failure(command: str, exc: BaseException, logger: logging.Logger) -> str:
    """:func:`command_failure`'s line, logged: a bug with its traceback (once), else at debug."""
    failure = command_failure(command, exc)
    if failure.expected:
        logger.debug("teleop command %s", failure.detail)
    else:
        logger.error("teleop command %s", failure.detail, exc_info=exc)
    return failure.detail
