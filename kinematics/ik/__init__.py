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
from hilbot.kinematics.ik.limits import (
    Capsule,
    CollisionAvoidance,
    ConfigurationLimit,
    Limit,
    LinearInequality,
    Sphere,
    VelocityLimit,
)
from hilbot.kinematics.ik.mt_collision import load_self_collision
from hilbot.kinematics.ik.mt_tasks import (
    ElbowHint,
    FrameTask,
    JointLimitTask,
    ManipulabilityTask,
    PostureTask,
    RelativeFrameTask,
    RestTask,
    SelfCollision,
)
from hilbot.kinematics.ik.multistart import MultiStartSolver
from hilbot.kinematics.ik.multitask import MultiTaskSolver
from hilbot.kinematics.ik.qp import QPSolver
from hilbot.kinematics.ik.solution import Solution, Status
from hilbot.kinematics.ik.target import OrientationKind, Target, parse_target

__all__ = [
    "BatchResult",
    "BatchSolver",
    "Capsule",
    "CollisionAvoidance",
    "ConfigurationLimit",
    "DLSSolver",
    "ElbowHint",
    "FABRIKSolver",
    "FrameTask",
    "IKError",
    "InvalidTarget",
    "JointLimitTask",
    "Limit",
    "LinearInequality",
    "ManipulabilityTask",
    "MultiStartSolver",
    "MultiTaskSolver",
    "NoDofs",
    "NoSolution",
    "OrientationKind",
    "OrientationUnreachable",
    "PostureTask",
    "QPSolver",
    "RelativeFrameTask",
    "RestTask",
    "SelfCollision",
    "Solution",
    "Solver",
    "Sphere",
    "Status",
    "Target",
    "Unreachable",
    "UnsupportedJoint",
    "VelocityLimit",
    "load_self_collision",
    "parse_target",
    "solve",
]
