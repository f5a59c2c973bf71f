"""Errors of the hardware layer.

Every error carries data, so callers and tests check fields, not messages::

    HalError
    ├── ConfigError (ValueError)   a servo/joint mapping that cannot work: servo_id, field
    ├── BusError (ConnectionError)
    │   ├── PortError              the serial port cannot be opened or used: port
    │   ├── TorqueNotConfirmed     torque off not read back on every servo: off, on, silent
    │   └── CommError              a transaction failed: servo_id, instruction, result
    │       ├── CommTimeout (TimeoutError)  no (complete) status packet within the deadline
    │       └── CrcError           a status packet arrived corrupt
    │           └── MalformedReply a valid packet of the wrong shape (short, garbled): detail
    │               └── WrongReplyId   a valid reply from another servo: expected, received
    ├── ServoError                 the servo answered with error bits: servo_id, instruction, error
    │   ├── HardwareFault          the hardware-error status is set: servo_id, flags
    │   └── DataLimitError         a goal outside a limit register: register, value, limit
    ├── StartupError               start-up checks failed: servo_id, problem, expected, found
    │   └── ServoLimitError        joint limits past a limit register: register, found, expected
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


class TorqueNotConfirmed(BusError):
    """Torque off was sent, but not every servo's read-back says it is off.

    Raised by a torque-off whose read-back misses servos, so the caller learns which
    servos are safe and which are not, instead of one servo's timeout.

    Attributes:
        off: ids whose Torque Enable reads 0.
        on: ids that answered with torque still on.
        silent: ids that did not answer the read-back (their torque is unknown).
        joints: ``{id: joint}`` of the servos above, for messages.
    """

    def __init__(
        self,
        *,
        off: tuple[int, ...],
        on: tuple[int, ...],
        silent: tuple[int, ...],
        joints: dict[int, str] | None = None,
    ) -> None:
        names = joints or {}

        def who(ids: tuple[int, ...]) -> str:
            return ", ".join(f"{i} ({names[i]})" if i in names else str(i) for i in ids)

        parts = [f"torque is off on servo(s) {who(off)}"] if off else []
        if on:
            parts.append(f"servo(s) {who(on)} still have torque on")
        if silent:
            parts.append(f"servo(s) {who(silent)} did not answer: their torque is unknown")
        super().__init__("; ".join(parts) or "no servo confirmed torque off")
        self.off = off
        self.on = on
        self.silent = silent
        self.joints = names


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


class WrongReplyId(MalformedReply):
    """A valid status packet (or Fast Sync Read slice) carries another id than was asked.

    Its data is never taken for the servo that was asked: a slice or status packet
    re-addressed by a glitch, or a stray reply, would otherwise become that servo's
    reading. Counted and retried like any corrupt reply (``BusCounters.crc_errors``).

    Attributes:
        expected: the id the reply should have come from (also ``servo_id``).
        received: the id it carried.
    """

    def __init__(self, expected: int, received: int, instruction: str) -> None:
        super().__init__(expected, instruction, f"reply from id {received}, expected id {expected}")
        self.expected = expected
        self.received = received


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


class DataLimitError(ServoError):
    """A goal outside the servo's own limit register (the firmware's Data Limit Error).

    Raised when a servo answers a write with Data Limit Error (Angle Limit Error on
    Protocol 1.0), and by the backend before a sync write (which has no reply, so the
    firmware would drop the goal unseen) whose goal lies outside the limit registers the
    backend read at start-up. Counted in ``BusCounters.data_limit_errors``; never
    clamped.

    Attributes:
        register: the limit register, e.g. ``"Max Position Limit"`` (``""`` when the
            servo's reply does not say which).
        address: its control-table address, or ``None``.
        value: the refused goal [ticks], or ``None`` when unknown.
        limit: the limit register's value [ticks], or ``None`` when unknown.
    """

    def __init__(
        self,
        servo_id: int,
        instruction: str,
        error: int,
        *,
        register: str = "",
        address: int | None = None,
        value: int | None = None,
        limit: int | None = None,
        joint: str = "",
    ) -> None:
        super().__init__(servo_id, instruction, error, "data limit error")
        where = f" at address {address}" if address is not None else ""
        if register and value is not None and limit is not None:
            side = "above" if register.startswith(("Max", "CCW")) else "below"
            of = f" (joint {joint!r})" if joint else ""
            message = (
                f"servo {servo_id}{of}: goal {value} is {side} its {register} "
                f"({address}) of {limit}: refused, not clamped (data limit error)"
            )
        else:
            message = (
                f"servo {servo_id} refused {instruction}{where}: data limit error (a value "
                "outside its limit registers)"
            )
        self.args = (message,)
        self.register = register
        self.address = address
        self.value = value
        self.limit = limit
        self.joint = joint


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
    LIMITS = "joint limits beyond the servo's limit registers"
    NO_TORQUE = "a limit register that leaves no torque"  # PWM Limit 0, Current Limit 0


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


class ServoLimitError(StartupError):
    """The config lets a joint go where the servo's own limit register forbids.

    Attributes:
        register: the limit register, e.g. ``"Max Position Limit"``.
        address: its control-table address.
        command: the ``hilbot servo`` command line that sets the register.
        (``expected`` is the value the config needs, ``found`` the register's.)
    """

    def __init__(
        self,
        message: str,
        *,
        servo_id: int,
        register: str,
        address: int,
        expected: int,
        found: int,
        command: str,
        problem: StartupProblem = StartupProblem.LIMITS,
    ) -> None:
        super().__init__(
            message, servo_id=servo_id, problem=problem, expected=expected, found=found
        )
        self.register = register
        self.address = address
        self.command = command
