"""What every IK solver shares: targets, solutions, errors, the ``Solver`` base and its context.

- ``target``: the accepted target forms, parsed once into a ``Target``;
- ``solution``: ``Solution``, ``Status`` and the ``SolveMeta`` a solver reports;
- ``errors``: the ``IKError`` tree;
- ``solver``: the ``Solver`` base class with the one public ``solve`` call;
- ``box``, ``chain_info``: the per-call box and the per-chain facts;
- ``context``, ``residual``: evaluating FK, Jacobian and task errors at a configuration.
"""

from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.context import Context, Evaluation
from hilbot.kinematics.ik.core.errors import (
    IKError,
    InvalidPositions,
    InvalidTarget,
    NoDofs,
    NoSolution,
    OrientationUnreachable,
    Unreachable,
    UnsupportedJoint,
)
from hilbot.kinematics.ik.core.solution import Solution, SolveMeta, Status
from hilbot.kinematics.ik.core.solver import SolveOptions, Solver
from hilbot.kinematics.ik.core.target import OrientationKind, Target, parse_target

__all__ = [
    "Box",
    "ChainInfo",
    "Context",
    "Evaluation",
    "IKError",
    "InvalidPositions",
    "InvalidTarget",
    "NoDofs",
    "NoSolution",
    "OrientationKind",
    "OrientationUnreachable",
    "Solution",
    "SolveMeta",
    "SolveOptions",
    "Solver",
    "Status",
    "Target",
    "Unreachable",
    "UnsupportedJoint",
    "parse_target",
]
