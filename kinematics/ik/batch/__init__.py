"""Batched IK: many targets, or many worlds of one chain, solved at once on a batch axis.

One part of the library, on the single solvers' rules (tested equal to them):

- ``dls_solver``: ``BatchSolver``, ``DLSSolver``'s iteration for B targets
  (``dls_run`` iterates, ``dls_step`` takes the damped steps);
- ``qp_solver``: ``QPBatchSolver``, ``QPSolver``'s problem for B worlds (``qp_run``
  iterates, ``qp_box`` solves the box QPs with ``cholesky``, ``qp_dense`` the ones
  with general rows, ``qp_limits`` and ``qp_rows`` build them);
- ``solve_ik``: ``solve_ik`` and ``FrameTargets``, one differential step under the
  limits for a ``Configuration`` (``configuration``; one world or B), mink's
  functional call shape; ``priority`` is its prioritized (null-space) step;
- ``solver``: ``BatchSolve``, the ``solve_batch`` call both batch solvers share;
  ``inputs`` checks B targets, seeds and boxes at the door; ``results`` turns
  arrays into ``Solution``s; ``fk``: batched FK and Jacobians.

It builds on ``core``, ``dls`` and ``qp``; none of them imports it. Users import
these names from ``hilbot.kinematics.ik``; see docs/ik_batch.md.
"""

from hilbot.kinematics.ik.batch.configuration import Configuration
from hilbot.kinematics.ik.batch.dls_solver import BatchResult, BatchSolver
from hilbot.kinematics.ik.batch.qp_solver import QPBatchResult, QPBatchSolver
from hilbot.kinematics.ik.batch.solve_ik import FrameTargets, solve_ik

__all__ = [
    "BatchResult",
    "BatchSolver",
    "Configuration",
    "FrameTargets",
    "QPBatchResult",
    "QPBatchSolver",
    "solve_ik",
]
