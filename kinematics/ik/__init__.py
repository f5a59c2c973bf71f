"""Inverse-kinematics solvers behind one interface.

Every solver has the same call::

    solver.solve(robot, state_or_positions, source_link, target_link, target, **options)

and returns a ``Solution`` or raises one of the errors below (all under
``IKError``, itself a ``KinematicsError``). ``solve`` is that call on a shared
``DLSSolver``. ``BatchSolver.solve_batch`` solves many targets at once and
``MultiTaskSolver`` weighs several targets of one tree (bimanual, legged).
"""

from hilbot.kinematics.ik.base import Solver
from hilbot.kinematics.ik.batch import BatchResult, BatchSolver
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
from hilbot.kinematics.ik.fabrik import FABRIKSolver
from hilbot.kinematics.ik.multistart import MultiStartSolver
from hilbot.kinematics.ik.multitask import MultiTaskSolver
from hilbot.kinematics.ik.qp import QPSolver
from hilbot.kinematics.ik.solution import Solution, Status
from hilbot.kinematics.ik.target import OrientationKind, Target, parse_target

__all__ = [
    "BatchResult",
    "BatchSolver",
    "DLSSolver",
    "FABRIKSolver",
    "IKError",
    "InvalidTarget",
    "MultiStartSolver",
    "MultiTaskSolver",
    "NoDofs",
    "NoSolution",
    "OrientationKind",
    "OrientationUnreachable",
    "QPSolver",
    "Solution",
    "Solver",
    "Status",
    "Target",
    "Unreachable",
    "UnsupportedJoint",
    "parse_target",
    "solve",
]
