"""The QP solver with hard limits, in the style of mink.

- ``qp_solver``: ``QPSolver``, one small QP per iteration on a chain;
- ``step``: gathering the limits' rows into one QP step;
- ``dense``: the dense QP solvers (box-constrained and general inequalities);
- ``limits``: the hard limits (configuration, velocity, linear inequalities,
  collision pairs), public as ``hilbot.kinematics.ik.limits``.
"""

from hilbot.kinematics.ik.qp.dense import QPResult, QPStatus, solve_box_qp, solve_qp
from hilbot.kinematics.ik.qp.qp_solver import QPSolver

__all__ = ["QPResult", "QPSolver", "QPStatus", "solve_box_qp", "solve_qp"]
