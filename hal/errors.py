"""Errors of the hardware layer.

Every error carries data, so callers and tests check fields, not messages::

    HalError
    ├── ConfigError (ValueError)   a servo/joint mapping that cannot work: servo_id, field
    ├── BusError (ConnectionError)
    │   ├── PortError              the serial port cannot be opened or used: port
    │   └── CommError              a transaction failed: servo_id, instruction, result
    │       ├── CommTimeout (TimeoutError)  no (complete) status packet within the deadline
    │       └── CrcError           a status packet arrived corrupt
    │           └── MalformedReply a valid packet of the wrong shape (short, garbled): detail
    ├── ServoError                 the servo answered with error bits: servo_id, instruction, error
    │   └── HardwareFault          the hardware-error status is set: servo_id, flags
    ├── StartupError               start-up checks failed: servo_id, problem, expected, found
    └── CommandError (ValueError)  a command outside what the hardware may be sent: joint, value
"""

from __future__ import annotations

import enum

from hilbot.hal.backend import HardwareErrorFlags


class HalError(Exception):
    """Root of every error raised by ``hilbot.hal``."""


class ConfigError(HalError, ValueError):
    """A servo/joint configuration that cannot work.

    Attributes:
        servo_id: the servo concerned, or ``None`` for a bus-wide problem.
        field: the configuration field that is wrong (``"model"``, ``"id"``, ...).
    """

    def __init__(self, message: str, *, servo_id: int | None = None, field: str = "") -> None:
        super().__init__(message)
        self.servo_id = servo_id
        self.field = field


class BusError(HalError, ConnectionError):
    """The bus itself failed (port, framing, timeouts)."""


class PortError(BusError):
    """The serial port cannot be opened or used."""

    def __init__(self, message: str, *, port: str) -> None:
        super().__init__(message)
        self.port = port


class CommResult(enum.Enum):
    """Why a transaction failed; mirrors dynamixel-sdk's ``COMM_*`` codes."""

    TX_FAIL = "tx fail"  # the port did not take the whole packet
    TX_ERROR = "tx error"  # the packet could not be built
    RX_TIMEOUT = "rx timeout"  # nothing arrived
    RX_CORRUPT = "rx corrupt"  # a partial or corrupt packet arrived (CRC/checksum)
    RX_FAIL = "rx fail"
    PORT_BUSY = "port busy"
    NOT_AVAILABLE = "not available"  # the instruction does not exist on this protocol


class CommError(BusError):
    """A bus transaction failed.

    Attributes:
        servo_id: the servo addressed (the first one that did not answer for group reads),
            or ``None`` for a broadcast.
        instruction: the instruction name, e.g. ``"SYNC_READ"``.
        result: why it failed.
    """

    def __init__(self, servo_id: int | None, instruction: str, result: CommResult) -> None:
        who = "broadcast" if servo_id is None else f"servo {servo_id}"
        super().__init__(f"{instruction} to {who} failed: {result.value}")
        self.servo_id = servo_id
        self.instruction = instruction
        self.result = result


class CommTimeout(CommError, TimeoutError):
    """No complete status packet arrived before the deadline."""

    def __init__(self, servo_id: int | None, instruction: str) -> None:
        super().__init__(servo_id, instruction, CommResult.RX_TIMEOUT)


class CrcError(CommError):
    """A status packet arrived with a bad CRC (2.0) or checksum (1.0)."""

    def __init__(self, servo_id: int | None, instruction: str) -> None:
        super().__init__(servo_id, instruction, CommResult.RX_CORRUPT)


class MalformedReply(CrcError):
    """A status packet passed its CRC but does not fit the instruction (too short, garbled).

    dynamixel-sdk indexes such a reply without checking it (``IndexError`` out of its
    ``ping``); the bus turns that into this error. It is a corrupt reply like a CRC
    error: retried, then raised, and counted in ``BusCounters.crc_errors``.

    Attributes:
        detail: what was wrong (e.g. the SDK's exception).
    """

    def __init__(self, servo_id: int | None, instruction: str, detail: str) -> None:
        super().__init__(servo_id, instruction)
        self.args = (f"{self.args[0]} (malformed reply: {detail})",)
        self.detail = detail


class ServoError(HalError):
    """A servo answered with error bits set in its status packet.

    Attributes:
        servo_id: the servo.
        instruction: the instruction it answered.
        error: the raw ERR byte of the status packet.
        reason: a readable decoding of ``error``.
    """

    def __init__(self, servo_id: int, instruction: str, error: int, reason: str) -> None:
        super().__init__(f"servo {servo_id} rejected {instruction}: {reason} (error 0x{error:02X})")
        self.servo_id = servo_id
        self.instruction = instruction
        self.error = error
        self.reason = reason


class HardwareFault(ServoError):
    """The servo's hardware-error status is set; it has cut torque until rebooted.

    Attributes:
        flags: the decoded hardware-error status.
    """

    def __init__(self, servo_id: int, flags: HardwareErrorFlags, instruction: str = "") -> None:
        super().__init__(servo_id, instruction or "status", int(flags), flags.describe())
        self.args = (
            f"servo {servo_id} reports a hardware error: {flags.describe()}; "
            "fix the cause, then reboot the servo to clear it",
        )
        self.flags = flags


class StartupProblem(enum.Enum):
    """What a start-up check found.

    A protocol mismatch is not among them: a model configured on a bus of the other
    protocol is a ``ConfigError`` when the backend is created, and a servo running the
    other protocol's firmware cannot parse the bus's packets, so it is ``MISSING``.
    """

    MISSING = "missing"  # no answer to ping
    WRONG_MODEL = "wrong model"
    UNSUPPORTED_MODEL = "unsupported model"
    WRONG_MODE = "wrong operating mode"
    NO_STATUS_RETURN = "status return level 0"  # the servo never answers reads


class StartupError(HalError):
    """A start-up check failed.

    Attributes:
        servo_id: the servo concerned.
        problem: what is wrong.
        expected: what the configuration says (model name, mode, ...).
        found: what the servo reported, or ``None`` when it did not answer.
    """

    def __init__(
        self,
        message: str,
        *,
        servo_id: int,
        problem: StartupProblem,
        expected: object = None,
        found: object = None,
    ) -> None:
        super().__init__(message)
        self.servo_id = servo_id
        self.problem = problem
        self.expected = expected
        self.found = found


class CommandError(HalError, ValueError):
    """A command the hardware may not be sent (unknown joint, outside the servo's range).

    Attributes:
        joint: the joint named in the command.
        value: the commanded value, or ``None`` for an unknown joint.
    """

    def __init__(self, message: str, *, joint: str, value: float | None = None) -> None:
        super().__init__(message)
        self.joint = joint
        self.value = value
