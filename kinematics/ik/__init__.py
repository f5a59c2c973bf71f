"""Inverse-kinematics solvers behind one interface.

Every solver has the same call::

    solver.solve(robot, state_or_positions, source_link, target_link, target, **options)

and returns a ``Solution`` or raises one of the errors below (all under
``IKError``, itself a ``KinematicsError``). ``solve`` is that call on a shared
``DLSSolver``.
"""

from hilbot.kinematics.ik.base import Solver
from hilbot.kinematics.ik.dls import DLSSolver, solve
from hilbot.kinematics.ik.errors import (
    IKError,
    InvalidTarget,
    NoDofs,
    NoSolution,
    OrientationUnreachable,
    Unreachable,
    UnsupportedJoint,
)
from hilbot.kinematics.ik.solution import Solution, Status
from hilbot.kinematics.ik.target import OrientationKind, Target, parse_target

__all__ = [
    "DLSSolver",
    "IKError",
    "InvalidTarget",
    "NoDofs",
    "NoSolution",
    "OrientationKind",
    "OrientationUnreachable",
    "Solution",
    "Solver",
    "Status",
    "Target",
    "Unreachable",
    "UnsupportedJoint",
    "parse_target",
    "solve",
]
