"""Batched damped least squares: many targets (or many worlds) at once, vectorised in numpy.

``BatchSolver.solve_batch`` runs the ``DLSSolver`` iteration on a batch axis:
the same clamped, error-scaled damping, the same active set on the box, the
same whole-vector step scaling, backtracking and stall rules, item by item, so
it gives the same answers as one-by-one solves (the tests check it). FK and
Jacobians come from a generated ``BatchKernel`` on (B,) arrays (or
``Chain.fk_jacobian_batch`` for chains with planar or floating joints); each
iteration works only on the items still running.

``BatchSolver`` is also a ``Solver``: ``solve`` is a batch of one. The rest
pose and SVD options of ``DLSSolver`` are not offered here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.codegen.batch_kernel import BatchKernel
from hilbot.kinematics.ik.batch.dls_run import Batch, BatchRun
from hilbot.kinematics.ik.batch.inputs import BatchCall, orientation_array
from hilbot.kinematics.ik.batch.results import STATUSES
from hilbot.kinematics.ik.batch.solver import BatchSolve
from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.context import Context, contexts
from hilbot.kinematics.ik.core.solution import SolveMeta
from hilbot.kinematics.ik.core.solver import SolveOptions, Solver
from hilbot.kinematics.ik.core.target import (
    OrientationKind,
    Target,
)
from hilbot.kinematics.ik.dls.dls_solver import DLSSolver

Array = NDArray[np.float64]


class BatchResult(NamedTuple):
    """Arrays for a whole batch (from ``solve_batch(..., as_arrays=True)``).

    Attributes:
        q: (B, dof) configurations.
        residual: (B,) position residuals [m].
        orientation_residual: (B,) orientation residuals [rad] (NaN without orientation).
        reached: (B,) bool, the target met: position within tolerance, and the
            orientation too when the targets have one.
        status: (B,) int codes, indices into ``STATUSES``.
        iterations: (B,) iterations per item.
        position_reached: (B,) bool, position within tolerance.
    """

    q: Array
    residual: Array
    orientation_residual: Array
    reached: NDArray[np.bool_]
    status: NDArray[np.int64]
    iterations: NDArray[np.int64]
    position_reached: NDArray[np.bool_]


class BatchSolver(Solver, BatchSolve[BatchResult]):
    """Vectorised DLS over a batch axis (see the module docstring).

    Args take the same meaning as ``DLSSolver``'s.
    """

    def __init__(
        self,
        *,
        damping: float = 1e-6,
        orientation_weight: float = 0.25,
        max_step: float = 0.5,
        position_clamp: float = 0.25,
        orientation_clamp: float = 0.75,
        max_backtracks: int = 4,
        stall_iterations: int = 4,
        stall_ratio: float = 1e-3,
    ) -> None:
        super().__init__()
        # Validate through DLSSolver so both reject the same values the same way.
        self.reference = DLSSolver(
            damping=damping,
            orientation_weight=orientation_weight,
            max_step=max_step,
            position_clamp=position_clamp,
            orientation_clamp=orientation_clamp,
            max_backtracks=max_backtracks,
            stall_iterations=stall_iterations,
            stall_ratio=stall_ratio,
        )
        self._contexts: dict[int, Context] = {}
        self._kernels: dict[int, tuple[Context, BatchKernel | None]] = {}

    def _run(self, info: ChainInfo, lo: Array, hi: Array, options: SolveOptions) -> BatchRun:
        """A ``BatchRun`` on ``info``'s chain, with its cached context and batch kernel."""
        ctx = contexts(self._contexts, info)
        cached = self._kernels.get(id(info.chain))
        if cached is None or cached[0] is not ctx:
            kernel = BatchKernel(info.chain) if ctx.scalar else None
            cached = self._kernels[id(info.chain)] = (ctx, kernel)
        return BatchRun(self.reference, ctx, lo, hi, options, cached[1])

    def _solve(
        self, chain: Any, q0: Array, target: Target, box: Box, options: SolveOptions
    ) -> tuple[Array, SolveMeta]:
        batch = Batch(
            target.kind,
            np.array([target.point]),
            None if target.kind is OrientationKind.NONE else orientation_array([target]),
        )
        lo, hi = box.lower[None, :], box.upper[None, :]
        q, res, ori, status, its = self._run(self.info(chain), lo, hi, options).solve(
            q0[None], batch
        )
        orientation = None if target.kind is OrientationKind.NONE else float(ori[0])
        return q[0], SolveMeta(int(its[0]), float(res[0]), orientation, STATUSES[status[0]])

    def _batch_info(self, chain: Any) -> ChainInfo:
        return self.info(chain)

    def _batch(
        self, chain: Any, info: ChainInfo, call: BatchCall, options: SolveOptions
    ) -> BatchResult:
        batch, q0, _, lo, hi = call
        q, res, ori, status, its = self._run(info, lo, hi, options).solve(q0, batch)
        q = np.minimum(np.maximum(q, lo), hi)  # the final safety projection
        position_reached = res <= options.tolerance
        reached = position_reached.copy()
        if batch.kind is not OrientationKind.NONE:
            reached &= ori <= options.orientation_tolerance
        return BatchResult(q, res, ori, reached, status.astype(np.int64), its, position_reached)
