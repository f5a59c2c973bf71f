"""The QP solver with hard limits, in the style of mink.

- ``qp_solver``: ``QPSolver``, one small QP per iteration on a chain;
- ``step``: gathering the limits' rows into one QP step;
- ``dense``: the dense QP solvers (box-constrained and general inequalities);
- ``limits``: the hard limits (configuration, velocity, linear inequalities,
  collision pairs), public as ``hilbot.kinematics.ik.limits``.

Its batched forms, ``QPBatchSolver`` and the functional ``solve_ik`` (with
``Configuration`` and ``FrameTargets``), are in ``hilbot.kinematics.ik.batch``
(still importable from here).
"""

from typing import Any as _Any

from hilbot.kinematics.ik.qp.dense import QPResult, QPStatus, solve_box_qp, solve_qp
from hilbot.kinematics.ik.qp.qp_solver import QPSolver

__all__ = [
    "Configuration",
    "FrameTargets",
    "QPBatchResult",
    "QPBatchSolver",
    "QPResult",
    "QPSolver",
    "QPStatus",
    "solve_box_qp",
    "solve_ik",
    "solve_qp",
]

_BATCH = ("Configuration", "FrameTargets", "QPBatchResult", "QPBatchSolver", "solve_ik")


def __getattr__(name: str) -> _Any:
    # The batch package imports this one, so its names are looked up on first use.
    if name in _BATCH:
        from hilbot.kinematics.ik import batch

        return getattr(batch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
