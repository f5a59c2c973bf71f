"""A user-given linear inequality ``G dq <= h`` on the step."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hilbot.kinematics.ik.limits.limit import Constraint, Limit, LimitContext


class LinearInequality(Limit):
    """Rows ``G dq <= h`` in the solver's column order (``Chain.jacobian_columns``).

    Args:
        g: (m, nv) rows.
        h: (m,) right-hand sides.

    Raises:
        ValueError: on shapes that disagree or non-finite values.
    """

    def __init__(self, g: npt.ArrayLike, h: npt.ArrayLike) -> None:
        g_mat = np.atleast_2d(np.asarray(g, dtype=np.float64))
        h_vec = np.atleast_1d(np.asarray(h, dtype=np.float64))
        if g_mat.ndim != 2 or h_vec.shape != (g_mat.shape[0],):
            raise ValueError(f"G must be (m, nv) and h (m,), got {g_mat.shape} and {h_vec.shape}")
        if not (np.isfinite(g_mat).all() and np.isfinite(h_vec).all()):
            raise ValueError("G and h must be finite")
        self.g = g_mat
        self.h = h_vec

    def constraint(self, context: LimitContext) -> Constraint:
        """The rows as given (checked against the number of columns)."""
        nv = context.q.shape[0]
        if self.g.shape[1] != nv:
            raise ValueError(
                f"LinearInequality has {self.g.shape[1]} columns but the solve has {nv} "
                f"({', '.join(context.names)})"
            )
        return Constraint(g=self.g, h=self.h)

    def __repr__(self) -> str:
        return f"LinearInequality(rows={self.g.shape[0]}, columns={self.g.shape[1]})"
