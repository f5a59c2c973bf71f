"""A user-given linear inequality on the step ``dq`` or on the configuration ``q + dq``."""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from hilbot.kinematics.ik.qp.limits.limit import Constraint, Limit, LimitContext


class LinearInequality(Limit):
    """Rows ``G x <= h`` in the solver's column order (``Chain.jacobian_columns``).

    With ``on="step"`` (default) ``x`` is each iteration's step ``dq``, as in the QP;
    with ``on="configuration"`` it is the configuration after the step, ``q + dq``
    (for scalar joints), e.g. ``q_elbow + q_wrist <= 2.0`` for a cable that must not
    wind up: the row becomes ``G dq <= h - G q``.

    Args:
        g: (m, nv) rows.
        h: (m,) right-hand sides.
        on: ``"step"`` or ``"configuration"``.

    Raises:
        ValueError: on shapes that disagree, non-finite values or an unknown ``on``.
    """

    def __init__(
        self,
        g: npt.ArrayLike,
        h: npt.ArrayLike,
        on: Literal["step", "configuration"] = "step",
    ) -> None:
        g_mat = np.atleast_2d(np.asarray(g, dtype=np.float64))
        h_vec = np.atleast_1d(np.asarray(h, dtype=np.float64))
        if g_mat.ndim != 2 or h_vec.shape != (g_mat.shape[0],):
            raise ValueError(f"G must be (m, nv) and h (m,), got {g_mat.shape} and {h_vec.shape}")
        if not (np.isfinite(g_mat).all() and np.isfinite(h_vec).all()):
            raise ValueError("G and h must be finite")
        if on not in ("step", "configuration"):
            raise ValueError(f"on must be 'step' or 'configuration', got {on!r}")
        self.g = g_mat
        self.h = h_vec
        self.on = on

    def constraint(self, context: LimitContext) -> Constraint:
        """The rows, shifted by ``G q`` when they bound the configuration."""
        nv = context.q.shape[0]
        if self.g.shape[1] != nv:
            raise ValueError(
                f"LinearInequality has {self.g.shape[1]} columns but the solve has {nv} "
                f"({', '.join(context.names)})"
            )
        if self.on == "configuration":
            return Constraint(g=self.g, h=self.h - self.g @ context.q)
        return Constraint(g=self.g, h=self.h)

    def __repr__(self) -> str:
        return (
            f"LinearInequality(rows={self.g.shape[0]}, columns={self.g.shape[1]}, on={self.on!r})"
        )
