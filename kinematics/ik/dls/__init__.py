"""Damped least squares: the ``DLSSolver`` and its multi-start form.

- ``dls_solver``: ``DLSSolver`` and the module-level ``solve`` (the default solver);
- ``multistart_solver``: ``MultiStartSolver``, random restarts around any inner solver.

The batched form, ``BatchSolver``, is in ``hilbot.kinematics.ik.batch`` (still
importable from here).
"""

from typing import Any as _Any

from hilbot.kinematics.ik.dls.dls_solver import DLSSolver, solve
from hilbot.kinematics.ik.dls.multistart_solver import MultiStartSolver

__all__ = ["BatchResult", "BatchSolver", "DLSSolver", "MultiStartSolver", "solve"]


def __getattr__(name: str) -> _Any:
    # The batch package imports this one, so its names are looked up on first use.
    if name in ("BatchResult", "BatchSolver"):
        from hilbot.kinematics.ik import batch

        return getattr(batch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
