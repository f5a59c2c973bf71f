"""Errors raised by the IK solvers; each carries the data needed to act on it.

Tree (the root ``KinematicsError`` lives in ``hilbot.kinematics.errors``)::

    KinematicsError
    └── IKError
        ├── NoDofs                  the chain has no movable joint
        ├── InvalidTarget           NaN/inf, wrong shape, non-unit quaternion, not a rotation
        ├── InvalidPositions        a seed or state coordinate that is NaN, inf or absurdly large
        ├── UnsupportedJoint        the algorithm cannot handle a joint type in the chain
        ├── Unreachable             the target lies beyond the chain's reach
        ├── NoSolution              the solver stalled or diverged away from the target
        └── OrientationUnreachable  ``strict_orientation`` and the orientation was not met

The failure errors (``Unreachable``, ``NoSolution``, ``OrientationUnreachable``)
carry best-effort ``positions`` (every joint, inside the limits and the
per-call ``max_delta`` box) and the ``solution`` they come from, so a caller
can still move towards the target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hilbot.kinematics.errors import KinematicsError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from hilbot.kinematics.ik.core.solution import Solution


class IKError(KinematicsError):
    """Root of every inverse-kinematics error."""


class NoDofs(IKError):
    """The chain between the two links has no movable joint, so nothing can be solved.

    Attributes:
        chain: the ``Chain`` that was asked for.
        source: its source link (``None`` if the chain does not expose it).
        target: its target link (``None`` if the chain does not expose it).
    """

    def __init__(self, chain: Any) -> None:
        self.chain = chain
        links = getattr(chain, "links", None) or ()
        self.source: str | None = str(links[0]) if links else None
        self.target: str | None = str(links[-1]) if links else None
        super().__init__(
            f"the chain {self.source!r} -> {self.target!r} has no movable joint; "
            "pick a source link higher up the tree (or a target link further down)"
        )


class InvalidTarget(IKError, ValueError):
    """A target could not be understood (bad shape, NaN/inf, not a rotation, ...).

    Attributes:
        reason: what is wrong, in words.
        value: the offending value, as given.
    """

    def __init__(self, reason: str, value: object) -> None:
        self.reason = reason
        self.value = value
        super().__init__(
            f"invalid IK target: {reason}; expected a position (3,), (position, None), "
            "(position, tool axis (3,)), (position, quaternion (w, x, y, z)), "
            f"(position, rotation (3, 3)) or a 4x4 transform; got {_short(value)}"
        )


class InvalidPositions(IKError, ValueError):
    """Joint positions (a state or a seed) a solver cannot start from.

    A coordinate is NaN or infinite, or larger than ``MAX_POSITION`` (1e9 rad or m:
    no joint reads that, and the solvers' arithmetic stays finite below it).

    Attributes:
        joints: the chain joints whose coordinates are at fault.
        reason: what is wrong, in words.
    """

    def __init__(self, joints: list[str], reason: str) -> None:
        self.joints = joints
        self.reason = reason
        super().__init__(f"positions must be {reason}; not so for joints {joints}")


#: Largest joint coordinate a solver starts from [rad] or [m].
MAX_POSITION = 1e9


class UnsupportedJoint(IKError):
    """An algorithm cannot handle a joint type that the chain contains.

    Attributes:
        joint: the joint's name.
        joint_type: its URDF type (``"planar"``, ``"floating"`` ...).
        solver: the solver class name that refused it.
    """

    def __init__(self, joint: str, joint_type: str, solver: str) -> None:
        self.joint = joint
        self.joint_type = joint_type
        self.solver = solver
        super().__init__(
            f"{solver} cannot handle joint {joint!r} of type {joint_type!r}; "
            "use DLSSolver or QPSolver for chains with planar or floating joints"
        )


class Unreachable(IKError):
    """The target position lies beyond the chain's reach.

    Attributes:
        target: the parsed ``Target``.
        reach: the chain's reach from its first movable joint [m].
        distance: the distance from that joint to the target position [m].
        positions: best-effort positions (every joint), stretched towards the target.
        solution: the best-effort ``Solution``.
    """

    def __init__(
        self,
        target: Any,
        reach: float,
        distance: float,
        positions: Mapping[str, Any],
        solution: Solution,
    ) -> None:
        self.target = target
        self.reach = reach
        self.distance = distance
        self.positions = dict(positions)
        self.solution = solution
        super().__init__(
            f"target is {distance:.4g} m from the chain's first joint but the chain reaches "
            f"only {reach:.4g} m; move the target closer (best-effort positions pointing at "
            "it are in .positions)"
        )


class NoSolution(IKError):
    """The solver stalled or diverged without reaching the target.

    Attributes:
        positions: best-effort positions (every joint).
        solution: the best-effort ``Solution`` (status, iterations, residuals).
        status: the solution's status.
        residual: the position residual reached [m].
        orientation_residual: the orientation residual reached [rad], or ``None``.
    """

    def __init__(self, positions: Mapping[str, Any], solution: Solution) -> None:
        self.positions = dict(positions)
        self.solution = solution
        self.status = solution.status
        self.residual = solution.residual
        self.orientation_residual = solution.orientation_residual
        super().__init__(
            f"IK {solution.status} after {solution.iterations} iterations with a position "
            f"residual of {solution.residual:.3g} m; the target may be outside the joint "
            "limits or the max_delta box: try MultiStartSolver, a closer seed "
            "(initial_positions) or a larger max_iterations"
        )


class OrientationUnreachable(IKError):
    """``strict_orientation=True`` and the orientation could not be met.

    Attributes:
        orientation_residual: the orientation residual reached [rad].
        tolerance: the orientation tolerance asked for [rad].
        positions: best-effort positions (position met where possible).
        solution: the best-effort ``Solution``.
    """

    def __init__(
        self,
        orientation_residual: float,
        tolerance: float,
        positions: Mapping[str, Any],
        solution: Solution,
    ) -> None:
        self.orientation_residual = orientation_residual
        self.tolerance = tolerance
        self.positions = dict(positions)
        self.solution = solution
        super().__init__(
            f"orientation residual {orientation_residual:.4g} rad exceeds the tolerance "
            f"{tolerance:.4g} rad; the chain may lack the degrees of freedom for this "
            "orientation: pass strict_orientation=False to let position win, or a tool axis"
        )


def _short(value: object) -> str:
    """A bounded repr for error messages."""
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
