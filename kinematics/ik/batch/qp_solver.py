"""``QPBatchSolver``: the ``QPSolver`` problem for B worlds at once, vectorised in numpy.

One chain, B targets and B seeds; every world gets the hard limits of
``QPSolver`` (configuration and velocity limits, the call's box, linear
inequalities, collision pairs) and the same iteration (see ``batch_qp_run``).
The box path is exact at every iteration; a world whose step would break a
general row is solved exactly by the dense active-set solver. Each world's
answer equals ``QPSolver.solve`` on the same inputs (the tests check 1e-9).

Per-world outcomes follow ``QPSolver.solve``'s failure policy, reported rather
than raised: ``errors`` names, per world, the error ``QPSolver.solve`` would raise
(``Unreachable``, ``NoSolution``, ``OrientationUnreachable``) or None. A target
beyond the chain's reach is solved position-only, as the single solver does
before raising ``Unreachable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.batch.fk import Kernel, kernel_for
from hilbot.kinematics.ik.batch.inputs import BatchCall
from hilbot.kinematics.ik.batch.qp_rows import Targets
from hilbot.kinematics.ik.batch.qp_run import BatchQPRun, Outcome, Settings
from hilbot.kinematics.ik.batch.results import STATUSES
from hilbot.kinematics.ik.batch.solver import BatchSolve
from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.solution import Status
from hilbot.kinematics.ik.core.solver import SolveOptions
from hilbot.kinematics.ik.core.target import OrientationKind
from hilbot.kinematics.ik.qp.limits.configuration_limit import ConfigurationLimit
from hilbot.kinematics.ik.qp.limits.limit import Limit
from hilbot.kinematics.ik.qp.qp_solver import QPSolver

Array = NDArray[np.float64]
#: Per-world error codes of ``QPBatchResult.error``: index into this tuple.
ERRORS = (None, "Unreachable", "NoSolution", "OrientationUnreachable")
_NONE, _UNREACHABLE, _NO_SOLUTION, _ORIENTATION = range(4)


class QPBatchResult(NamedTuple):
    """Arrays for a whole batch.

    Attributes:
        q: (B, dof) configurations (inside every world's box).
        residual: (B,) position residuals [m].
        orientation_residual: (B,) orientation residuals [rad] (NaN without orientation).
        reached: (B,) bool, the target met: position, and orientation when it has one.
        position_reached: (B,) bool, the position within tolerance.
        status: (B,) int codes, indices into ``STATUSES``.
        iterations: (B,) iterations per world.
        error: (B,) int codes, indices into ``ERRORS``: what ``QPSolver.solve`` would raise.
    """

    q: Array
    residual: Array
    orientation_residual: Array
    reached: NDArray[np.bool_]
    position_reached: NDArray[np.bool_]
    status: NDArray[np.int64]
    iterations: NDArray[np.int64]
    error: NDArray[np.int64]


class QPBatchSolver(BatchSolve[QPBatchResult]):
    """``QPSolver`` for many worlds at once (see the module docstring).

    Args:
        limits: extra hard limits, as ``QPSolver``'s.
        position_weight: as ``QPSolver``'s.
        orientation_weight: as ``QPSolver``'s.
        damping: as ``QPSolver``'s.
        lm_damping: as ``QPSolver``'s.

    Example:
        >>> solver = QPBatchSolver([VelocityLimit(dt=0.01)])  # doctest: +SKIP
        >>> out = solver.solve_batch(robot, seeds, "base_link", "tool0", poses)  # doctest: +SKIP
    """

    def __init__(
        self,
        limits: Sequence[Limit] = (),
        *,
        position_weight: float = 1.0,
        orientation_weight: float = 0.3,
        damping: float = 1e-9,
        lm_damping: float = 1e-3,
    ) -> None:
        # Validate through QPSolver, so both reject the same values the same way.
        self.reference = QPSolver(
            limits,
            position_weight=position_weight,
            orientation_weight=orientation_weight,
            damping=damping,
            lm_damping=lm_damping,
        )
        self.limits = self.reference.limits
        self._infos: dict[int, tuple[ChainInfo, Kernel | None]] = {}

    def _info(self, chain: Any) -> tuple[ChainInfo, Kernel | None]:
        cached = self._infos.get(id(chain))
        if cached is None or cached[0].chain is not chain:
            info = ChainInfo(chain)
            kernel = kernel_for(chain) if info.scalar and info.dof else None
            cached = self._infos[id(chain)] = (info, kernel)
        return cached

    def _settings(self, respect_limits: bool) -> Settings:
        ref = self.reference
        limits = self.limits
        if respect_limits and not any(isinstance(lim, ConfigurationLimit) for lim in limits):
            limits = (*limits, ConfigurationLimit())
        elif not respect_limits:
            limits = tuple(lim for lim in limits if not isinstance(lim, ConfigurationLimit))
        return Settings(
            limits, ref.position_weight, ref.orientation_weight, ref.damping, ref.lm_damping
        )

    def _batch_info(self, chain: Any) -> ChainInfo:
        return self._info(chain)[0]

    def _batch(
        self, chain: Any, info: ChainInfo, call: BatchCall, options: SolveOptions
    ) -> QPBatchResult:
        tgt, q0, _, lo, hi = call
        settings = self._settings(options.respect_limits)
        run = BatchQPRun(settings, chain, info.names, info.scalar, self._info(chain)[1], options)
        far = _beyond_reach(info, tgt.point, options.tolerance)
        out = _solve(run, q0, tgt, lo, hi, far)
        return _result(out, q0, lo, hi, far, options)


def _beyond_reach(info: ChainInfo, point: Array, tolerance: float) -> NDArray[np.bool_]:
    d = point - info.base_origin
    return (
        np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2]) > info.reach + tolerance
    )


def _solve(
    run: BatchQPRun, q0: Array, targets: Targets, lo: Array, hi: Array, far: NDArray[np.bool_]
) -> Outcome:
    """The run on every world; beyond reach: position only (the single solver's stretch)."""
    if not far.any():
        return run.solve(q0, targets, lo, hi)
    near = np.flatnonzero(~far)
    away = np.flatnonzero(far)
    size, n = q0.shape
    q = np.empty((size, n))
    res, ang = np.empty(size), np.full(size, np.nan)
    status, its = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
    parts = [(near, targets), (away, Targets(OrientationKind.NONE, targets.point, None))]
    for idx, tgt in parts:
        if not idx.size:
            continue
        orientation = None if tgt.orientation is None else tgt.orientation[idx]
        part = run.solve(q0[idx], Targets(tgt.kind, tgt.point[idx], orientation), lo[idx], hi[idx])
        q[idx], res[idx], ang[idx], status[idx], its[idx] = part
    return Outcome(q, res, ang, status, its)


def _result(
    out: Outcome,
    q0: Array,
    lo: Array,
    hi: Array,
    far: NDArray[np.bool_],
    options: SolveOptions,
) -> QPBatchResult:
    """Box safety projection, ``reached`` and the single solver's failure policy per world."""
    q = np.minimum(np.maximum(out.q, lo), hi)
    position = out.residual <= options.tolerance
    reached = position & ~(out.angle > options.orientation_tolerance)  # NaN: no orientation
    error = np.full(q.shape[0], _NONE, dtype=np.int64)
    error[far] = _UNREACHABLE
    miss = ~reached & ~far
    if options.strict_orientation:
        error[miss & position] = _ORIENTATION
    other = miss & ~position & (out.status != STATUSES.index(Status.TIMEOUT))
    if options.max_delta is not None:
        margin = 1e-9 + 1e-6 * options.max_delta
        other &= ~(np.abs(q - q0) >= options.max_delta - margin).any(axis=1)
    error[other] = _NO_SOLUTION
    return QPBatchResult(
        q, out.residual, out.angle, reached, position, out.status, out.iterations, error
    )


__all__ = ["ERRORS", "QPBatchResult", "QPBatchSolver"]
