"""Inverse-kinematics solvers behind one interface.

Every solver has the same call::

    solver.solve(robot, state_or_positions, source_link, target_link, target, **options)

and returns a ``Solution`` or raises one of the errors below (all under
``IKError``, itself a ``KinematicsError``). ``solve`` is that call on a shared
``DLSSolver``. ``MultiTaskSolver`` weighs several targets of one tree (bimanual, legged).

The code is grouped by family: ``core`` (targets, solutions, errors, the ``Solver``
base), ``dls`` (damped least squares, multi-start), ``qp`` (the QP solver and its
``limits``), ``multitask``, ``fabrik``, and ``batch``: many targets or worlds at once
(``BatchSolver``, ``QPBatchSolver``, the functional ``solve_ik``); the generated
kernels they run on are in ``hilbot.kinematics.codegen``.
"""

from hilbot.kinematics.ik.batch import (
    BatchResult,
    BatchSolver,
    Configuration,
    FrameTargets,
    QPBatchResult,
    QPBatchSolver,
    solve_ik,
)
from hilbot.kinematics.ik.core import (
    IKError,
    InvalidPositions,
    InvalidTarget,
    NoDofs,
    NoSolution,
    OrientationKind,
    OrientationUnreachable,
    Solution,
    Solver,
    Status,
    Target,
    Unreachable,
    UnsupportedJoint,
    parse_target,
)
from hilbot.kinematics.ik.dls import DLSSolver, MultiStartSolver, solve
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
from hilbot.kinematics.ik.multitask import (
    ElbowHint,
    FrameTask,
    JointLimitTask,
    ManipulabilityTask,
    MultiTaskSolver,
    PostureTask,
    RelativeFrameTask,
    RestTask,
    SelfCollision,
    load_self_collision,
)
from hilbot.kinematics.ik.qp import QPSolver

__all__ = [
    "BatchResult",
    "BatchSolver",
    "Capsule",
    "CollisionAvoidance",
    "Configuration",
    "ConfigurationLimit",
    "DLSSolver",
    "ElbowHint",
    "FABRIKSolver",
    "FrameTargets",
    "FrameTask",
    "IKError",
    "InvalidPositions",
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
    "QPBatchResult",
    "QPBatchSolver",
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
    "solve_ik",
]
