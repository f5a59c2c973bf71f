"""Multi-start IK: random restarts within the limits around any solver, for cold starts."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.context import Context, contexts, weighted_cost
from hilbot.kinematics.ik.core.solution import SolveMeta, Status
from hilbot.kinematics.ik.core.solver import SolveOptions, Solver
from hilbot.kinematics.ik.core.target import Target
from hilbot.kinematics.ik.dls.dls_solver import DLSSolver

Array = NDArray[np.float64]
_W2 = 0.0625  # orientation weight² [m²/rad²] for ranking starts of a solver that is not DLS


class MultiStartSolver(Solver):
    """Run ``inner`` from the seed, then from random configurations in the box.

    Each restart draws ``candidates`` configurations uniformly within the per-call
    box (limits and ``max_delta``; ``±span`` around the seed where unbounded) and
    starts from the one with the smallest task error (the weighted squared error
    the DLS iterations reduce, evaluated by FK only: a few µs each, while an
    attempt from a worse start costs iterations of several µs each). With
    ``screen_seed`` the first attempt does the same with the seed among the
    candidates: a warm seed, centimetres from the target, always wins (so a good
    warm start still costs one attempt), while a random seed far from the target
    gives way to a closer draw. The first converged attempt wins; otherwise the
    best one (smallest position residual, then orientation) is returned with its
    status, or ``timeout`` if the time budget ran out. ``Solution.iterations``
    counts all attempts.

    Args:
        inner: the solver to restart (default: a ``DLSSolver``).
        restarts: random restarts after the seeded attempt.
        time_budget: wall-clock budget per call [s] (``None``: count only).
        seed: seed of the restart generator (reproducible sequences).
        span: half-width of the sampling range of unbounded coordinates [rad] or [m].
        attempt_iterations: iteration cap per attempt (``None``: the call's
            ``max_iterations``). A solve from a random seed that has not converged
            in about 20-25 iterations rarely does; restarting is cheaper.
        attempt_stall_iterations: an attempt (the seeded one included; not the
            final polish of the best one) gives up as ``stalled`` after this many
            consecutive accepted steps that each shrink the weighted error by less
            than ``attempt_stall_ratio``: it is crawling out of a local minimum, and
            a restart is cheaper (measured on the UR5, Panda and WidowX: 30-45 %
            fewer iterations per cold start on average, 14-28 % at the median, at
            the same success rate). A warm seed
            converges quadratically and never trips it; for tracking use the inner
            solver directly. ``attempt_stall_ratio=0.0`` turns it off. Applies to
            solvers that honour ``SolveOptions.stall`` (DLS, batch).
        attempt_stall_ratio: see ``attempt_stall_iterations``.
        candidates: uniform draws per restart, the one with the smallest task error
            used (1: a plain uniform draw). Measured on the UR5, Panda and WidowX cold
            starts with 4 candidates and ``screen_seed``: 1.3-1.6x fewer Python
            operations per solve at the median, 1.1-1.5x on average, same success.
        screen_seed: let the first attempt start from a candidate with a smaller
            task error than the seed (``False``: always from the seed).

    Raises:
        ValueError: a parameter is out of range.
    """

    def __init__(
        self,
        inner: Solver | None = None,
        *,
        restarts: int = 30,
        time_budget: float | None = None,
        seed: int | None = 0,
        span: float = math.pi,
        attempt_iterations: int | None = None,
        attempt_stall_iterations: int = 2,
        attempt_stall_ratio: float = 0.1,
        candidates: int = 4,
        screen_seed: bool = True,
    ) -> None:
        super().__init__()
        if restarts < 0:
            raise ValueError(f"restarts must be >= 0, got {restarts}")
        if time_budget is not None and not time_budget > 0.0:
            raise ValueError(f"time_budget must be None or > 0 [s], got {time_budget}")
        if not span > 0.0:
            raise ValueError(f"span must be > 0, got {span}")
        if attempt_iterations is not None and attempt_iterations < 1:
            raise ValueError(f"attempt_iterations must be None or >= 1, got {attempt_iterations}")
        if attempt_stall_iterations < 1:
            raise ValueError(
                f"attempt_stall_iterations must be >= 1, got {attempt_stall_iterations}"
            )
        if candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {candidates}")
        if not 0.0 <= attempt_stall_ratio < 1.0:
            raise ValueError(f"attempt_stall_ratio must be in [0, 1), got {attempt_stall_ratio}")
        self.attempt_iterations = attempt_iterations
        self.attempt_stall = (int(attempt_stall_iterations), float(attempt_stall_ratio))
        self.inner = DLSSolver() if inner is None else inner
        self.restarts = int(restarts)
        self.time_budget = time_budget
        self.span = float(span)
        self.rng = np.random.default_rng(seed)
        self.candidates = int(candidates)
        self.screen_seed = bool(screen_seed)
        self._contexts: dict[int, Context] = {}

    def _solve(
        self, chain: Any, q0: Array, target: Target, box: Box, options: SolveOptions
    ) -> tuple[Array, SolveMeta]:
        deadline = None if self.time_budget is None else time.perf_counter() + self.time_budget
        lo = np.where(np.isfinite(box.lower), box.lower, q0 - self.span)
        hi = np.where(np.isfinite(box.upper), box.upper, q0 + self.span)
        best: tuple[Array, SolveMeta] | None = None
        total = 0
        start = q0
        attempt_options = options._replace(
            polish=False,
            max_iterations=min(options.max_iterations, self.attempt_iterations or 1 << 30),
            stall=self.attempt_stall,
        )
        for attempt in range(self.restarts + 1):
            if attempt:
                start = self._draw(chain, target, lo, hi)
            elif self.screen_seed and self.candidates > 1:
                start = self._first(chain, target, q0, lo, hi)
            q, meta = self.inner._solve(chain, start, target, box, attempt_options)
            total += meta.iterations
            if best is None or _score(meta) < _score(best[1]):
                best = (q, meta)
            if meta.status is Status.CONVERGED:
                break
            if deadline is not None and time.perf_counter() > deadline:
                q, meta = best
                if meta.status is not Status.CONVERGED:
                    best = (q, meta._replace(status=Status.TIMEOUT))
                break
        assert best is not None
        q, meta = best
        if meta.status is not Status.CONVERGED and options.polish:
            # The best attempt gets the full treatment (e.g. position wins over orientation).
            status = meta.status
            q, meta = self.inner._solve(chain, q, target, box, options)
            total += meta.iterations
            if status is Status.TIMEOUT and meta.status is not Status.CONVERGED:
                meta = meta._replace(status=Status.TIMEOUT)
        return q, meta._replace(iterations=total)

    def _draw(self, chain: Any, target: Target, lo: Array, hi: Array) -> Array:
        """A restart: the best of ``candidates`` uniform draws by the task error there."""
        if self.candidates <= 1:
            return self.rng.uniform(lo, hi)
        draws = self.rng.uniform(lo, hi, (self.candidates, len(lo)))
        costs = self._costs(chain, target, draws.tolist())
        return np.asarray(draws[costs.index(min(costs))])

    def _first(self, chain: Any, target: Target, q0: Array, lo: Array, hi: Array) -> Array:
        """The seeded attempt's start: the seed unless a draw has a smaller task error."""
        draws = self.rng.uniform(lo, hi, (self.candidates, len(lo)))
        costs = self._costs(chain, target, [q0.tolist(), *draws.tolist()])
        best = costs.index(min(costs))
        return q0 if best == 0 else np.asarray(draws[best - 1])

    def _costs(self, chain: Any, target: Target, qs: list[list[float]]) -> list[float]:
        """The task error of each configuration (the inner DLS's own weighting if it is one)."""
        inner = self.inner
        if isinstance(inner, DLSSolver):
            return inner.task_costs(chain, target, qs)
        ctx = contexts(self._contexts, self.info(chain))
        return [weighted_cost(target, ctx.fk(q), _W2) for q in qs]


def _score(meta: SolveMeta) -> tuple[bool, float, float]:
    orientation = 0.0 if meta.orientation_residual is None else meta.orientation_residual
    return (meta.status is not Status.CONVERGED, meta.residual, orientation)
