"""Scenario steps turned into time functions: the target at each instant of a step.

Each motion step starts from where the robot is (``StepContext``: the last
commanded joint positions and the end-effector positions), so steps chain
without jumps, except the ``step`` response whose jump is the point.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.bench.errors import ScenarioError
from hilbot.driver.bench.scenario import (
    CartesianCircleStep,
    CartesianLineStep,
    CommandStep,
    FaultStep,
    HoldStep,
    JointSweepStep,
    MoveJointsStep,
    Step,
    StepResponseStep,
    TeleopStep,
)
from hilbot.driver.bench.segment import Segment, StepContext, Target, min_jerk
from hilbot.driver.bench.trace import load_trace

__all__ = [
    "Circle",
    "JointPath",
    "Line",
    "Segment",
    "StepContext",
    "Sweep",
    "Target",
    "build_segment",
    "load_trace",
    "min_jerk",
]


class JointPath(Segment):
    """Joint positions interpolated between ``start`` and ``goal`` (minimum jerk), and back."""

    def __init__(
        self, start: Mapping[str, float], goal: Mapping[str, float], duration: float, *, back: bool
    ) -> None:
        self.names = tuple(start)
        self.start = np.array([start[n] for n in self.names])
        self.goal = np.array([goal.get(n, start[n]) for n in self.names])
        self.leg = duration
        self.back = back
        self.duration = duration * (2 if back else 1)
        self.step = False

    def at(self, t: float) -> Target:
        """Return the interpolated joint target at ``t``."""
        forward = t < self.leg or not self.back
        s = (t if forward else t - self.leg) / self.leg
        k = 1.0 if self.step else min_jerk(s)
        a, b = (self.start, self.goal) if forward else (self.goal, self.start)
        q = a + (b - a) * k
        return Target(joints=dict(zip(self.names, q.tolist(), strict=True)))


class Sweep(Segment):
    """Sinusoidal sweeps around the start position, within the joint limits."""

    def __init__(self, step: JointSweepStep, ctx: StepContext) -> None:
        self.start = dict(ctx.joints)
        joints = step.joints or tuple(n for n in ctx.joints if n in ctx.limits)
        for joint in joints:
            if joint not in ctx.limits:
                raise ScenarioError(None, [("joint_sweep.joints", f"unknown joint {joint!r}")])
        self.amplitude = {j: _amplitude(self.start[j], ctx.limits[j], step) for j in joints}
        self.joints = joints
        self.period = step.period
        self.span = step.period * step.cycles
        self.sequential = step.sequential
        self.duration = self.span * (len(joints) if step.sequential else 1)

    def at(self, t: float) -> Target:
        """Return the sweep's joint target at ``t``."""
        q = dict(self.start)
        t = min(max(t, 0.0), self.duration)
        for i, joint in enumerate(self.joints):
            local = t - i * self.span if self.sequential else t
            if 0.0 <= local <= self.span:
                phase = math.sin(2.0 * math.pi * local / self.period)
                q[joint] = self.start[joint] + self.amplitude[joint] * phase
        return Target(joints=q)


def _amplitude(q0: float, limits: tuple[float, float], step: JointSweepStep) -> float:
    lower, upper = limits
    room = min(q0 - lower, upper - q0) - step.margin
    return max(0.0, min(step.amplitude * (upper - lower) / 2.0, room))


class Line(Segment):
    """A straight end-effector line with minimum-jerk timing, optionally there and back."""

    def __init__(self, step: CartesianLineStep, start: NDArray[np.float64]) -> None:
        self.chain = step.chain
        self.start = start
        goal = start + np.array(step.offset) if step.offset is not None else np.array(step.to)
        self.goal = goal
        self.leg = step.duration
        self.back = step.back
        self.duration = step.duration * (2 if step.back else 1)

    def at(self, t: float) -> Target:
        """Return the line's position target at ``t``."""
        forward = t < self.leg or not self.back
        s = min_jerk((t if forward else t - self.leg) / self.leg)
        a, b = (self.start, self.goal) if forward else (self.goal, self.start)
        return Target(chain=self.chain, position=a + (b - a) * s)


class Circle(Segment):
    """An end-effector circle through the start point, minimum-jerk in angle."""

    def __init__(self, step: CartesianCircleStep, start: NDArray[np.float64]) -> None:
        normal = _unit(np.array(step.normal), "cartesian_circle.normal")
        towards = np.array(step.towards, dtype=np.float64)
        towards = towards - normal * float(normal @ towards)
        towards = _unit(towards, "cartesian_circle.towards (projected onto the plane)")
        self.chain = step.chain
        self.center = start + step.radius * towards
        self.u = -towards  # from the centre to the start point
        self.v = np.cross(normal, self.u)
        self.radius = step.radius
        self.turns = step.cycles
        self.duration = step.period * step.cycles

    def at(self, t: float) -> Target:
        """Return the circle's position target at ``t``."""
        theta = 2.0 * math.pi * self.turns * min_jerk(t / self.duration)
        offset = self.radius * (math.cos(theta) * self.u + math.sin(theta) * self.v)
        return Target(chain=self.chain, position=self.center + offset)


def _unit(vector: NDArray[np.float64], field: str) -> NDArray[np.float64]:
    norm = float(np.linalg.norm(vector))
    if norm < 1e-9:
        raise ScenarioError(None, [(field, "must be a non-zero vector")])
    return vector / norm


def build_segment(step: Step, ctx: StepContext) -> Segment:
    """Return the time function of a motion step; command and fault steps hold still."""
    match step:
        case MoveJointsStep():
            goal = dict(step.positions) if step.positions is not None else dict(ctx.home)
            _check_joints(goal, ctx, "move_joints.positions")
            return JointPath(ctx.joints, goal, step.duration, back=False)
        case JointSweepStep():
            return Sweep(step, ctx)
        case StepResponseStep():
            _check_joints(step.deltas, ctx, "step.deltas")
            goal = {j: ctx.joints[j] + d for j, d in step.deltas.items()}
            path = JointPath(ctx.joints, goal, step.hold, back=step.back)
            path.step = True
            return path
        case CartesianLineStep():
            return Line(step, _ee(ctx, step.chain))
        case CartesianCircleStep():
            return Circle(step, _ee(ctx, step.chain))
        case TeleopStep():
            return load_trace(step, ctx)
        case HoldStep() | FaultStep():
            return JointPath(ctx.joints, ctx.joints, step.duration, back=False)
        case CommandStep():
            return JointPath(ctx.joints, ctx.joints, max(step.wait, 1e-9), back=False)
    raise AssertionError(f"unhandled step {step!r}")  # pragma: no cover - exhaustive


def _check_joints(names: Mapping[str, float], ctx: StepContext, field: str) -> None:
    unknown = sorted(set(names) - set(ctx.joints))
    if unknown:
        known = ", ".join(ctx.joints)
        raise ScenarioError(None, [(field, f"unknown joints {unknown}; known: {known}")])


def _ee(ctx: StepContext, chain: str) -> NDArray[np.float64]:
    if chain not in ctx.ee:
        raise ScenarioError(
            None, [("chain", f"unknown chain {chain!r}; known: {', '.join(ctx.ee)}")]
        )
    return np.array(ctx.ee[chain], dtype=np.float64)
