"""FABRIK (Aristidou and Lasenby 2011) for position targets on serial chains.

Each iteration runs one backward and one forward FABRIK pass over the joint
origins and the tip, which gives desired positions for every point of the
chain at its current segment lengths. Those points are then mapped back to
joint coordinates, base to tip: a revolute joint turns by the angle that best
aligns all the points after it with their desired positions (the closed-form
least-squares rotation about its axis), a prismatic joint slides by the
least-squares offset along its axis; each coordinate is clamped into the
per-call box before the points after it move with it. So real joint axes,
offsets and limits are respected, not just segment lengths.

Only revolute, continuous and prismatic joints are handled (mimic followers
move with their leader); a planar or floating joint raises ``UnsupportedJoint``.
FABRIK is position-only: a target with an orientation raises ``InvalidTarget``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.errors import InvalidTarget, UnsupportedJoint
from hilbot.kinematics.ik.core.solution import SolveMeta, Status
from hilbot.kinematics.ik.core.solver import SolveOptions, Solver
from hilbot.kinematics.ik.core.target import OrientationKind, Target
from hilbot.kinematics.joint import JointType

Array = NDArray[np.float64]
_SUPPORTED = frozenset(
    {JointType.FIXED, JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC}
)


class _Point(NamedTuple):
    """A movable joint of the chain, as FABRIK sees it."""

    link: str  # the joint's child link: its frame origin is the joint origin
    axis: Array  # (3,) axis in that frame
    prismatic: bool
    column: int | None  # configuration column, None for a mimic follower


class FABRIKSolver(Solver):
    """FABRIK with joint-space back-mapping (see the module docstring).

    Args:
        stall_iterations: iterations with less than ``stall_ratio`` relative progress
            before the solve ends ``stalled``.
        stall_ratio: relative decrease of the tip error that counts as progress.

    Raises:
        ValueError: a parameter is out of range.
    """

    def __init__(self, *, stall_iterations: int = 5, stall_ratio: float = 1e-4) -> None:
        super().__init__()
        if stall_iterations < 1 or not stall_ratio > 0.0:
            raise ValueError("stall_iterations must be >= 1 and stall_ratio > 0")
        self.stall_iterations = int(stall_iterations)
        self.stall_ratio = float(stall_ratio)
        self._plans: dict[int, tuple[Any, list[_Point]]] = {}

    def plan(self, chain: Any) -> list[_Point]:
        """The chain's movable joints, checked once.

        Raises:
            UnsupportedJoint: the chain has a planar or floating joint.
        """
        cached = self._plans.get(id(chain))
        if cached is not None and cached[0] is chain:
            return cached[1]
        columns = {name: i for i, (name, k) in enumerate(chain.jacobian_columns) if k == 0}
        points = []
        for joint in chain.path:
            if joint.type not in _SUPPORTED:
                raise UnsupportedJoint(joint.name, joint.type.value, type(self).__name__)
            if joint.type is JointType.FIXED:
                continue
            leader = chain.robot.leader(joint.name)
            column = columns.get(joint.name) if leader is None else None
            prismatic = joint.type is JointType.PRISMATIC
            points.append(_Point(joint.child, np.asarray(joint.axis), prismatic, column))
        self._plans[id(chain)] = (chain, points)
        return points

    def _solve(
        self, chain: Any, q0: Array, target: Target, box: Box, options: SolveOptions
    ) -> tuple[Array, SolveMeta]:
        points = self.plan(chain)
        if target.kind is not OrientationKind.NONE:
            raise InvalidTarget(
                "FABRIKSolver is position-only; pass a position or (position, None), "
                "or use DLSSolver for orientations",
                target,
            )
        goal = np.array(target.point)
        q = q0.copy()
        best, stall = math.inf, 0
        for iteration in range(options.max_iterations + 1):
            origins, axes, tip = _geometry(chain, points, q)
            error = float(np.linalg.norm(tip - goal))
            if error <= options.tolerance:
                return q, SolveMeta(iteration, error, None, Status.CONVERGED)
            stall = stall + 1 if error > best * (1.0 - self.stall_ratio) else 0
            best = min(best, error)
            if stall >= self.stall_iterations:
                return q, SolveMeta(iteration, error, None, Status.STALLED)
            if iteration == options.max_iterations:
                return q, SolveMeta(iteration, error, None, Status.TIMEOUT)
            chain_points = np.vstack([origins, tip[None, :]])
            desired = _fabrik_pass(chain_points, goal)
            _map_back(points, q, chain_points, axes, desired, box)
        raise AssertionError("unreachable")  # pragma: no cover


def _geometry(chain: Any, points: list[_Point], q: Array) -> tuple[Array, Array, Array]:
    """Joint origins (n, 3), joint axes (n, 3) and the tip (3,) in the source frame."""
    poses = chain.link_poses(q)
    origins = np.array([poses[p.link][:3, 3] for p in points])
    axes = np.array([poses[p.link][:3, :3] @ p.axis for p in points])
    return origins, axes, poses[chain.target][:3, 3]


def _fabrik_pass(points: Array, goal: Array) -> Array:
    """One backward and one forward FABRIK pass; the first point stays fixed."""
    lengths = np.linalg.norm(np.diff(points, axis=0), axis=1)
    out = points.copy()
    out[-1] = goal
    for i in range(len(points) - 2, -1, -1):
        out[i] = out[i + 1] + lengths[i] * _unit(points[i] - out[i + 1])
    out[0] = points[0]
    for i in range(len(points) - 1):
        out[i + 1] = out[i] + lengths[i] * _unit(out[i + 1] - out[i])
    return out


def _unit(v: Array) -> Array:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else v


def _map_back(
    points: list[_Point], q: Array, current: Array, axes: Array, desired: Array, box: Box
) -> None:
    """Fit joint coordinates, base to tip, to the desired points (``q`` updated in place)."""
    current = current.copy()
    axes = axes.copy()
    for i, point in enumerate(points):
        after = slice(i + 1, None)
        axis, origin = axes[i], current[i]
        if point.column is None:
            continue
        c = point.column
        if point.prismatic:
            shift = float(np.mean((desired[after] - current[after]) @ axis))
            new = min(max(q[c] + shift, box.lower[c]), box.upper[c])
            current[after] += (new - q[c]) * axis
        else:
            u = current[after] - origin
            v = desired[after] - origin
            u -= np.outer(u @ axis, axis)
            v -= np.outer(v @ axis, axis)
            sin_sum = float(np.sum(np.cross(u, v) @ axis))
            cos_sum = float(np.sum(u * v))
            if abs(sin_sum) + abs(cos_sum) < 1e-18:
                continue
            angle = math.atan2(sin_sum, cos_sum)
            new = min(max(q[c] + angle, box.lower[c]), box.upper[c])
            rotation = _rotation(axis, new - q[c])
            current[after] = (current[after] - origin) @ rotation.T + origin
            axes[after] = axes[after] @ rotation.T
        q[c] = new


def _rotation(axis: Array, angle: float) -> Array:
    """Rodrigues: rotation by ``angle`` about the unit ``axis``."""
    x, y, z = axis.tolist()
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array(
        [
            [c + x * x * t, x * y * t - z * s, x * z * t + y * s],
            [y * x * t + z * s, c + y * y * t, y * z * t - x * s],
            [z * x * t - y * s, z * y * t + x * s, c + z * z * t],
        ]
    )
