"""The public names of hilbot.kinematics.ik exist and are the documented ones."""

from __future__ import annotations

import hilbot.kinematics.ik as ik
from hilbot.kinematics.errors import KinematicsError


def test_all_names_exist():
    for name in ik.__all__:
        assert hasattr(ik, name), name


def test_required_names():
    required = {
        "DLSSolver", "QPSolver", "FABRIKSolver", "MultiStartSolver", "BatchSolver",
        "MultiTaskSolver", "Solution", "Status", "solve", "IKError", "NoDofs", "Unreachable",
        "NoSolution", "UnsupportedJoint", "InvalidTarget", "OrientationUnreachable",
    }  # fmt: skip
    assert required <= set(ik.__all__)


def test_error_tree():
    for name in ("NoDofs", "Unreachable", "NoSolution", "UnsupportedJoint", "InvalidTarget"):
        assert issubclass(getattr(ik, name), ik.IKError)
    assert issubclass(ik.IKError, KinematicsError)


def test_solvers_share_the_interface():
    for name in ("DLSSolver", "QPSolver", "FABRIKSolver", "MultiStartSolver", "BatchSolver"):
        assert issubclass(getattr(ik, name), ik.Solver)
