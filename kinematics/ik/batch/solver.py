"""``BatchSolve``: the one public ``solve_batch`` call every batch solver shares.

Contract for subclasses (``BatchSolver``, ``QPBatchSolver``): implement

- ``_batch_info(chain) -> ChainInfo``: the cached per-chain precomputations
  (where a subclass caches more per chain, such as a kernel, it builds it here);
- ``_batch(chain, info, call, options) -> R``: solve the checked ``BatchCall``
  (targets, seeds already inside their boxes, bases, boxes) and return the
  solver's arrays result ``R`` (a ``BatchArrays``), every configuration inside
  its box.

The base class does the shared work once per call: the chain, the ``NoDofs``
check, the options, the inputs (``batch_call``), and one ``Solution`` per item
unless ``as_arrays``.
"""

from __future__ import annotations

import abc
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.batch.inputs import BatchCall, batch_call
from hilbot.kinematics.ik.batch.results import batch_solutions
from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.errors import NoDofs
from hilbot.kinematics.ik.core.solution import Solution
from hilbot.kinematics.ik.core.solver import SolveOptions, _options
from hilbot.kinematics.ik.core.target import OrientationKind

Array = NDArray[np.float64]


class BatchArrays(Protocol):
    """What ``BatchSolve`` reads of a solver's arrays result to build the ``Solution`` list."""

    @property
    def q(self) -> Array:
        """(B, dof) configurations."""

    @property
    def residual(self) -> Array:
        """(B,) position residuals [m]."""

    @property
    def orientation_residual(self) -> Array:
        """(B,) orientation residuals [rad] (NaN without orientation)."""

    @property
    def reached(self) -> NDArray[np.bool_]:
        """(B,) bool, the whole target met."""

    @property
    def position_reached(self) -> NDArray[np.bool_]:
        """(B,) bool, the position within tolerance."""

    @property
    def status(self) -> NDArray[np.int64]:
        """(B,) int codes, indices into ``STATUSES``."""

    @property
    def iterations(self) -> NDArray[np.int64]:
        """(B,) iterations per item."""


R = TypeVar("R", bound=BatchArrays)


class BatchSolve(abc.ABC, Generic[R]):
    """Base of the batch solvers; see the module docstring for the subclass contract."""

    def solve_batch(
        self,
        robot: Any,
        initial: Any,
        source_link: str,
        target_link: str,
        targets: Any,
        *,
        max_iterations: int = 50,
        tolerance: float = 1e-4,
        orientation_tolerance: float = 0.01,
        strict_orientation: bool = False,
        respect_limits: bool = True,
        max_delta: float | None = None,
        as_arrays: bool = False,
    ) -> list[Solution] | R:
        """Solve ``B`` targets at once, each as the solver's single solve would.

        Args:
            robot: the ``Robot``.
            initial: (B, dof) seeds (or one (dof,) seed for all), or a sequence of ``B``
                states/mappings/flat arrays.
            source_link: frame of the targets and start of the chain.
            target_link: the link to move.
            targets: (B, 3) positions, (B, 4, 4) transforms, or a sequence of ``B``
                targets in any form ``parse_target`` accepts (all of one kind).
            max_iterations: iteration budget per item.
            tolerance: position tolerance [m].
            orientation_tolerance: orientation tolerance [rad].
            strict_orientation: accepted for the same call as ``Solver.solve``; a batch
                never raises, and ``reached`` always needs the orientation met (a
                solver may report what its single solve would raise, as
                ``QPBatchResult.error`` does).
            respect_limits: keep every item within the joint limits.
            max_delta: per-call bound on each coordinate's change from its seed.
            as_arrays: return the solver's arrays result (``BatchResult``,
                ``QPBatchResult``) instead of one ``Solution`` per item.

        Returns:
            One ``Solution`` per item, or the arrays result. Failures are reported in
            the status and ``reached`` fields, never raised per item.

        Raises:
            NoDofs: the chain has no movable joint.
            InvalidTarget: a target is malformed or not finite, or kinds are mixed.
            ValueError: shapes disagree or an option is out of range.
        """
        chain = robot.path_between(source_link, target_link)
        info = self._batch_info(chain)
        if info.dof == 0:
            raise NoDofs(chain)
        options = _options(
            max_iterations,
            tolerance,
            orientation_tolerance,
            strict_orientation,
            respect_limits,
            max_delta,
        )
        call = batch_call(info, initial, targets, respect_limits, max_delta)
        result = self._batch(chain, info, call, options)
        if as_arrays:
            return result
        kind = call.targets.kind
        orientation = None if kind is OrientationKind.NONE else result.orientation_residual
        return batch_solutions(
            info,
            result.q,
            result.iterations,
            result.residual,
            orientation,
            result.reached,
            result.status,
            result.position_reached,
            call.bases,
        )

    @abc.abstractmethod
    def _batch_info(self, chain: Any) -> ChainInfo:
        """The cached per-chain precomputations for ``chain``."""

    @abc.abstractmethod
    def _batch(self, chain: Any, info: ChainInfo, call: BatchCall, options: SolveOptions) -> R:
        """Solve the checked inputs ``call``; see the module docstring."""


__all__ = ["BatchArrays", "BatchSolve"]
