"""The safety layer: the last step before every bus write, whatever the target source.

:class:`SafetyLayer` turns a desired joint vector into a command that is

- finite (a NaN or infinite joint holds its last command),
- inside the joint limits (URDF limits intersected with the config's soft limits),
- at most ``max_delta_per_cycle`` and ``velocity * dt`` away from the last command,
  with the whole step vector scaled by one factor so that its direction is kept
  (clamping joints one by one bends the path and makes teleop lurch),
- a step that differs from the previous one by at most ``acceleration * dt²`` per joint,
  so that a source that bypasses the motion layer is bounded in acceleration too.

Every clamp is counted and reported as a :class:`ClampEvent` with the value
before and after. The :class:`Mode` state machine (disarmed, armed, estopped,
faulted) lives in :class:`ModeMachine`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import StrEnum
from hilbot.driver.runtime.errors import ConfigError, RuntimeStateError


class Mode(StrEnum):
    """Lifecycle of the robot as the runtime sees it."""

    DISARMED = "disarmed"  # torque off (or never enabled): commands are not written
    ARMED = "armed"  # torque on, commands written every cycle
    ESTOPPED = "estopped"  # latched: hold or torque off until an explicit reset
    FAULTED = "faulted"  # a servo or the bus failed: torque off until reset (and reboot)


class ClampKind(StrEnum):
    """Why a command was changed by the safety layer."""

    NON_FINITE = "non_finite"
    JOINT_LIMIT = "joint_limit"
    MAX_DELTA = "max_delta"
    VELOCITY = "velocity"
    ACCELERATION = "acceleration"


class ClampEvent(NamedTuple):
    """One joint's command changed by the safety layer in one cycle."""

    cycle: int
    kind: ClampKind
    joint: str
    before: float  # desired value [rad or m]
    after: float  # value after this clamp [rad or m]


@dataclass(frozen=True, slots=True)
class JointLimits:
    """Effective limits of the driven joints, in ``names`` order."""

    names: tuple[str, ...]
    lower: NDArray[np.float64]  # (n,) [rad or m]
    upper: NDArray[np.float64]  # (n,) [rad or m]
    velocity: NDArray[np.float64]  # (n,) [rad/s or m/s]

    def __post_init__(self) -> None:
        n = len(self.names)
        for array in (self.lower, self.upper, self.velocity):
            if array.shape != (n,):
                raise ValueError(f"limit arrays must have shape ({n},), got {array.shape}")
        if np.any(self.lower > self.upper):
            bad = self.names[int(np.argmax(self.lower > self.upper))]
            raise ValueError(f"joint {bad!r}: lower limit above upper limit")
        if np.any(self.velocity <= 0):
            bad = self.names[int(np.argmax(self.velocity <= 0))]
            raise ValueError(f"joint {bad!r}: velocity limit must be positive")

    def as_dict(self) -> dict[str, tuple[float, float]]:
        """Return ``{joint: (lower, upper)}``."""
        return {
            n: (float(lo), float(hi))
            for n, lo, hi in zip(self.names, self.lower, self.upper, strict=True)
        }


class SafetyLayer:
    """Clamp desired joint positions into a safe command; count and report every clamp.

    Args:
        limits: effective joint limits.
        max_delta: largest per-cycle change [rad or m], of every joint or (n,) per joint.
        period: the cycle period [s], for the velocity and acceleration limits.
        history: how many recent clamp events to keep.
        acceleration: (n,) per-joint acceleration limits [rad/s² or m/s²]; ``None``: none.
    """

    def __init__(
        self,
        limits: JointLimits,
        max_delta: float | NDArray[np.float64],
        period: float,
        history: int = 64,
        acceleration: NDArray[np.float64] | None = None,
    ) -> None:
        delta = np.broadcast_to(np.asarray(max_delta, dtype=np.float64), limits.lower.shape)
        if not np.all(delta > 0):
            raise ValueError(f"max_delta must be positive, got {max_delta}")
        self.limits = limits
        self.max_delta = delta.copy()  # (n,) [rad or m]
        self.period = period
        self._velocity_step = limits.velocity * period  # (n,) [rad] per cycle
        self.step_bound = np.minimum(self._velocity_step, delta)  # (n,)
        self._velocity_binds = self._velocity_step < delta  # (n,) which bound is tighter
        if acceleration is not None and not np.all(acceleration > 0):
            raise ValueError("acceleration limits must be positive")
        self.acceleration = acceleration
        # (n,) the largest change of the step from one cycle to the next [rad], with a
        # rounding allowance so that a motion planned exactly at the limit passes
        self._accel_step = (
            None if acceleration is None else acceleration * period * period * (1.0 + 1e-9)
        )
        self.events: deque[ClampEvent] = deque(maxlen=history)
        self.counts: dict[ClampKind, int] = dict.fromkeys(ClampKind, 0)
        self.total_clamps = 0  # clamp events since start

    def _event(self, cycle: int, kind: ClampKind, j: int, before: float, after: float) -> None:
        self.counts[kind] += 1
        self.total_clamps += 1
        self.events.append(ClampEvent(cycle, kind, self.limits.names[j], before, after))

    def apply(
        self,
        desired: NDArray[np.float64],
        last: NDArray[np.float64],
        cycle: int = 0,
        *,
        possible: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
        last_step: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """Return the safe command for this cycle (a new array; inputs are not changed).

        Args:
            desired: (n,) what the targets and IK ask for [rad or m].
            last: (n,) the previous command, which is inside the limits.
            cycle: the cycle number, for the events.
            possible: ``(lo, hi)``, each (n,): the box of goals that may be on the bus
                when writes failed since ``last`` went out (a write that raised may
                still have reached the servos). The command is then kept within one
                step of every goal in that box, not only of ``last``.
            last_step: (n,) ``last`` minus the command before it (``None``: at rest), for
                the acceleration limit.
        """
        lower, upper = self.limits.lower, self.limits.upper
        # Fast path, the common case: finite, inside the limits, a small step. NaN fails
        # both tests below; infinity is clipped, so it fails the equality test.
        cmd = np.minimum(np.maximum(desired, lower), upper)
        accel = self._accel_step
        if (
            possible is None
            and (np.abs(cmd - last) <= self.step_bound).all()
            and (cmd == desired).all()
            and (
                accel is None
                or (np.abs(cmd - last - (0.0 if last_step is None else last_step)) <= accel).all()
            )
        ):
            return cmd
        return self._apply_slow(desired, last, cycle, possible, last_step)

    def _apply_slow(
        self,
        desired: NDArray[np.float64],
        last: NDArray[np.float64],
        cycle: int,
        possible: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
        last_step: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        cmd = desired.copy()
        finite = np.isfinite(cmd)
        if not finite.all():
            for j in np.flatnonzero(~finite):
                self._event(cycle, ClampKind.NON_FINITE, int(j), float(cmd[j]), float(last[j]))
            cmd[~finite] = last[~finite]
        lower, upper = self.limits.lower, self.limits.upper
        clipped = np.minimum(np.maximum(cmd, lower), upper)
        if (clipped != cmd).any():
            for j in np.flatnonzero(clipped != cmd):
                self._event(cycle, ClampKind.JOINT_LIMIT, int(j), float(cmd[j]), float(clipped[j]))
        cmd = self._limit_step(clipped, last, cycle)
        if self._accel_step is not None:
            cmd = self._limit_acceleration(cmd, last, last_step, cycle)
        # Belt and braces: whatever happened above, nothing outside the box around the last
        # command or outside the limits leaves this function.
        bound = self.step_bound
        if possible is not None:
            # Within one step of every goal that may be on the bus: [hi - b, lo + b]. That
            # box holds [lo, hi] (whose width the runtime keeps <= b), so it is not empty,
            # and it lies inside the box around ``last`` (which is in [lo, hi]); the clip
            # to that box below wins should a caller ever pass an inconsistent one.
            lo, hi = possible
            np.minimum(cmd, lo + bound, out=cmd)
            np.maximum(cmd, hi - bound, out=cmd)
        np.minimum(cmd, last + bound, out=cmd)
        np.maximum(cmd, last - bound, out=cmd)
        np.minimum(cmd, upper, out=cmd)
        np.maximum(cmd, lower, out=cmd)
        return cmd

    def _limit_step(
        self, cmd: NDArray[np.float64], last: NDArray[np.float64], cycle: int
    ) -> NDArray[np.float64]:
        step = cmd - last
        magnitude = np.abs(step)
        over = magnitude > self.step_bound
        if not over.any():
            return cmd
        ratios = self.step_bound[over] / magnitude[over]
        scale = float(ratios.min())
        binding = int(np.flatnonzero(over)[int(np.argmin(ratios))])
        kind = ClampKind.VELOCITY if self._velocity_binds[binding] else ClampKind.MAX_DELTA
        scaled: NDArray[np.float64] = last + step * scale
        for j in np.flatnonzero(step != 0.0):
            self._event(cycle, kind, int(j), float(cmd[j]), float(scaled[j]))
        return scaled

    def _limit_acceleration(
        self,
        cmd: NDArray[np.float64],
        last: NDArray[np.float64],
        last_step: NDArray[np.float64] | None,
        cycle: int,
    ) -> NDArray[np.float64]:
        """Keep each joint's step within ``acceleration * dt²`` of its previous step."""
        assert self._accel_step is not None
        previous = np.zeros_like(last) if last_step is None else last_step
        step = cmd - last
        lo = np.maximum(previous - self._accel_step, -self.step_bound)
        hi = np.minimum(previous + self._accel_step, self.step_bound)
        limited = np.clip(step, lo, hi)
        changed = limited != step
        if not changed.any():
            return cmd
        out: NDArray[np.float64] = last + limited
        for j in np.flatnonzero(changed):
            self._event(cycle, ClampKind.ACCELERATION, int(j), float(cmd[j]), float(out[j]))
        return out

    def entry_command(self, present: NDArray[np.float64]) -> tuple[NDArray[np.float64], int | None]:
        """The first command when torque comes on: the present pose, clipped into the limits.

        Returns the command and the index of a joint that rests further outside its
        limits than one step (``None`` when every joint is close enough): enabling
        such a robot would make a jump, so the caller refuses.
        """
        lower, upper = self.limits.lower, self.limits.upper
        cmd = np.clip(present, lower, upper)
        gap = np.abs(cmd - present)
        too_far = gap > self.step_bound
        return cmd, (int(np.argmax(too_far)) if too_far.any() else None)


def effective_limits(
    names: Sequence[str],
    urdf: Mapping[str, tuple[float, float, float]],
    *,
    soft_limits: Mapping[str, tuple[float, float]],
    margin: float | Mapping[str, float],
    velocity: float | Mapping[str, float],
) -> JointLimits:
    """Intersect URDF limits with the config's soft limits and margin.

    Args:
        names: the driven joints.
        urdf: ``{joint: (lower, upper, velocity)}`` from the URDF (``inf`` where unlimited).
        soft_limits: ``{joint: (lower, upper)}`` from the config.
        margin: shrink every URDF limit by this much [rad or m], or ``{joint: margin}``.
        velocity: scale of the URDF velocity limits, or ``{joint: limit}``.
    """
    lower, upper, vel = [], [], []
    for name in names:
        lo, hi, v = urdf[name]
        if np.isfinite(lo) and np.isfinite(hi):
            m = float(margin.get(name, 0.0)) if isinstance(margin, Mapping) else margin
            problem = margin_problem(name, lo, hi, m)  # never skipped: too big is an error
            if problem is not None:
                raise ConfigError(None, ("safety", "soft_limit_margin"), problem)
            lo, hi = lo + m, hi - m
        if name in soft_limits:
            lo, hi = max(lo, soft_limits[name][0]), min(hi, soft_limits[name][1])
        v = float(velocity.get(name, v)) if isinstance(velocity, Mapping) else v * velocity
        lower.append(lo)
        upper.append(hi)
        vel.append(v if np.isfinite(v) and v > 0 else np.inf)
    return JointLimits(
        tuple(names),
        np.array(lower, dtype=np.float64),
        np.array(upper, dtype=np.float64),
        np.array(vel, dtype=np.float64),
    )


class ModeMachine:
    """The arm/disarm/e-stop/fault state machine.

    Starts disarmed; ``enable`` arms; any fault disarms into ``faulted``; an
    e-stop latches until ``reset``; ``reset`` returns to ``disarmed`` (never
    straight to armed: torque comes back only on an explicit enable).
    """

    def __init__(self) -> None:
        self.mode = Mode.DISARMED

    def require(self, command: str, *allowed: Mode) -> None:
        """Raise ``RuntimeStateError`` unless the mode is one of ``allowed``."""
        if self.mode not in allowed:
            hint = {
                Mode.ESTOPPED: "the e-stop is latched; send reset first",
                Mode.FAULTED: "a fault is active; send reset (and reboot if a servo latched it)",
                Mode.DISARMED: "the robot is disarmed; send enable first",
                Mode.ARMED: "the robot is armed; send disable first",
            }[self.mode]
            raise RuntimeStateError(command, self.mode.value, hint)

    def enable(self) -> None:
        """Go from disarmed to armed."""
        self.require("enable", Mode.DISARMED, Mode.ARMED)
        self.mode = Mode.ARMED

    def disable(self) -> None:
        """Go from armed to disarmed (an e-stop or fault stays latched)."""
        if self.mode is Mode.ARMED:
            self.mode = Mode.DISARMED

    def estop(self) -> None:
        """Latch the e-stop, from any mode."""
        self.mode = Mode.ESTOPPED

    def fault(self) -> None:
        """Go to faulted from armed or disarmed (an e-stop stays latched)."""
        if self.mode is not Mode.ESTOPPED:
            self.mode = Mode.FAULTED

    def reset(self) -> None:
        """Clear an e-stop or fault: back to disarmed."""
        self.require("reset", Mode.ESTOPPED, Mode.FAULTED, Mode.DISARMED)
        self.mode = Mode.DISARMED


# --- Sane ranges of the numbers in a robot config, and the soft-limit margin rule.
MAX_DELTA_PER_CYCLE = 0.5  # [rad or m] beyond this one cycle is a jump, not a step
MAX_JOINT_VELOCITY = 50.0  # [rad/s or m/s] a per-joint velocity limit (XL330-M077: ~40 rad/s)
MAX_JOINT_ACCELERATION = 5000.0  # [rad/s² or m/s²] a per-joint acceleration limit
MAX_JOINT_JERK = 1e6  # [rad/s³ or m/s³] a per-joint jerk limit
MAX_WATCHDOG_TIMEOUT = 60.0  # [s]
MIN_RATE_HZ = 1.0  # [Hz]
MAX_RATE_HZ = 2000.0  # [Hz] the loop's timing and stats are not made for more
#: A ``soft_limit_margin`` must leave every limited joint at least this fraction of its URDF
#: range; a margin that leaves less is an error naming the joint (it is never skipped).
MIN_RANGE_FRACTION = 0.1


def margin_problem(joint: str, lower: float, upper: float, margin: float) -> str | None:
    """Why ``margin`` cannot shrink ``joint``'s limits ``[lower, upper]``, or None if it can."""
    span = upper - lower
    left = span - 2.0 * margin
    if left >= MIN_RANGE_FRACTION * span * (1.0 - 1e-9):  # rounding of the bound itself
        return None
    most = (1.0 - MIN_RANGE_FRACTION) * span / 2.0
    return (
        f"a margin of {margin:g} leaves joint {joint!r} {max(left, 0.0):.4f} of its range "
        f"[{lower:.4f}, {upper:.4f}]; it must leave at least {MIN_RANGE_FRACTION:.0%} "
        f"(a margin of at most {most:.4f} for this joint), or narrow single joints with "
        "safety.soft_limits instead"
    )
