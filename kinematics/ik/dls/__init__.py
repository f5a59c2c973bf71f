"""Damped least squares: the ``DLSSolver``, its multi-start form and its batched form.

- ``dls_solver``: ``DLSSolver`` and the module-level ``solve`` (the default solver);
- ``multistart_solver``: ``MultiStartSolver``, random restarts around any inner solver;
- ``batch_solver``, ``batch_run``, ``batch_step``: ``BatchSolver``, the same iteration
  on a batch axis in numpy.
"""

from hilbot.kinematics.ik.dls.batch_solver import BatchResult, BatchSolver
from hilbot.kinematics.ik.dls.dls_solver import DLSSolver, solve
from hilbot.kinematics.ik.dls.multistart_solver import MultiStartSolver

__all__ = ["BatchResult", "BatchSolver", "DLSSolver", "MultiStartSolver", "solve"]
