"""Errors of the driver: configs, the runtime and its targets.

Every error carries data, so callers and tests check fields, not messages::

    DriverError
    ├── ConfigError (ValueError)      a robot config that cannot work: file, field path, expected
    ├── UnknownChain (KeyError)       a target for a chain the robot does not have
    ├── UnknownJoint (KeyError)       a joint target for a joint the robot does not drive
    ├── InvalidTarget (ValueError)    a target that cannot be used (shape, NaN/inf, type, size)
    ├── TrajectoryError (ValueError)  a trajectory file that cannot be played
    └── RuntimeStateError             a command not allowed in the current mode
        └── LimitViolation            enabling while a joint is far outside its limits
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hilbot._compat import StrEnum


class DriverError(Exception):
    """Root of every error raised by ``hilbot.driver``."""


class ConfigError(DriverError, ValueError):
    """A robot config is invalid; raised at load, before any port opens.

    Attributes:
        source: the YAML file, or ``None`` for a config built in Python.
        loc: path of the bad field, e.g. ``("servos", 2, "id")``.
        problem: what was wrong and what was expected.
    """

    def __init__(self, source: Path | None, loc: Sequence[str | int], problem: str) -> None:
        self.source = source
        self.loc = tuple(loc)
        self.problem = problem
        # A problem of the whole file (unreadable, not a mapping) names no field.
        parts = [str(source)] if source is not None else []
        if self.field:
            parts.append(self.field)
        from hilbot._bounded import clip  # one line, whatever the problem quotes

        super().__init__(clip(": ".join([*parts, problem]), 1000))

    @property
    def field(self) -> str:
        """The field path in dotted form, e.g. ``servos[2].id``."""
        out = ""
        for part in self.loc:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out


class UnknownChain(DriverError, KeyError):
    """A target names a chain that is not in the robot config."""

    def __init__(self, chain: str, known: Sequence[str]) -> None:
        self.chain = chain
        self.known = tuple(known)
        super().__init__(chain)

    def __str__(self) -> str:
        return f"unknown chain {self.chain!r}; known chains: {', '.join(self.known) or 'none'}"


class UnknownJoint(DriverError, KeyError):
    """A joint target names a joint that the robot does not drive."""

    def __init__(self, joint: str, known: Sequence[str]) -> None:
        self.joint = joint
        self.known = tuple(known)
        super().__init__(joint)

    def __str__(self) -> str:
        return f"unknown joint {self.joint!r}; driven joints: {', '.join(self.known)}"


class TargetProblem(StrEnum):
    """Machine-readable kind of an :class:`InvalidTarget`.

    The values are those of the teleop ``RejectReason`` for the same problem, so a
    target refused by ``Runtime.set_target`` and one refused on MQTT report the same
    ``reason``.
    """

    INVALID = "invalid"  # wrong type or shape, out of bounds, not a rotation, zero axis
    NON_FINITE = "non_finite"  # NaN, infinity, or a number too large for a float


class InvalidTarget(DriverError, ValueError):
    """A target was rejected before it could move anything.

    Attributes:
        chain: the chain (or ``"joints"`` for joint targets) the target was for.
        detail: what was wrong with it, for people.
        reason: what was wrong with it, for programs (``"invalid"`` or ``"non_finite"``,
            the teleop ``RejectReason`` values).
    """

    def __init__(
        self, chain: str, detail: str, reason: TargetProblem = TargetProblem.INVALID
    ) -> None:
        self.chain = chain
        self.detail = detail
        self.reason = TargetProblem(reason)
        super().__init__(f"invalid target for {chain!r}: {detail}")


class TrajectoryError(DriverError, ValueError):
    """A trajectory file cannot be played: where (file, row) and why."""

    def __init__(self, source: Path | None, where: str, reason: str) -> None:
        self.source = source
        self.where = where
        self.reason = reason
        prefix = f"{source}: " if source is not None else ""
        super().__init__(f"{prefix}{where}: {reason}")


class RuntimeStateError(DriverError):
    """A command that the runtime's current mode does not allow.

    Attributes:
        command: the command that was refused.
        mode: the mode the runtime was in.
        reason: why it was refused and what to do.
    """

    def __init__(self, command: str, mode: str, reason: str) -> None:
        self.command = command
        self.mode = mode
        self.reason = reason
        super().__init__(f"cannot {command} while {mode}: {reason}")


class LimitViolation(RuntimeStateError):
    """Enabling was refused: a joint rests further outside its limits than one safe step.

    Attributes:
        joint: the joint.
        position: its present position [rad or m].
        lower: the effective lower limit.
        upper: the effective upper limit.
    """

    def __init__(self, joint: str, position: float, lower: float, upper: float) -> None:
        self.joint = joint
        self.position = position
        self.lower = lower
        self.upper = upper
        super().__init__(
            "enable",
            "disarmed",
            f"joint {joint!r} is at {position:.4f}, outside its limits "
            f"[{lower:.4f}, {upper:.4f}] by more than one max-delta step; "
            "move it inside by hand (torque is off) and enable again",
        )
