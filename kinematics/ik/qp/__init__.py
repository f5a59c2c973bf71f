"""The QP solver with hard limits, in the style of mink.

- ``qp_solver``: ``QPSolver``, one small QP per iteration on a chain;
- ``batch_qp_solver``: ``QPBatchSolver``, the same problem for B worlds at once
  (``batch_run`` iterates, ``batch_box`` solves the box QPs, ``batch_limits`` and
  ``batch_rows`` build them; ``core.batch_inputs`` checks the inputs);
- ``solve_ik``: one differential step under the limits for a ``Configuration`` (one
  world or B), mink's functional call shape;
- ``step``: gathering the limits' rows into one QP step;
- ``dense``: the dense QP solvers (box-constrained and general inequalities);
- ``limits``: the hard limits (configuration, velocity, linear inequalities,
  collision pairs), public as ``hilbot.kinematics.ik.limits``.
"""

from hilbot.kinematics.ik.qp.batch_qp_solver import QPBatchResult, QPBatchSolver
from hilbot.kinematics.ik.qp.configuration import Configuration
from hilbot.kinematics.ik.qp.dense import QPResult, QPStatus, solve_box_qp, solve_qp
from hilbot.kinematics.ik.qp.qp_solver import QPSolver
from hilbot.kinematics.ik.qp.solve_ik import FrameTargets, solve_ik

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
