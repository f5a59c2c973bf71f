"""The ``Solver`` base class: the one public ``solve`` call every IK solver shares.

Contract for subclasses (``DLSSolver``, ``QPSolver``, ...): implement

    ``_solve(chain, q0, target, box, options) -> (q, SolveMeta)``

- ``chain`` is the memoised ``Chain`` from ``Robot.path_between``; per-chain
  precomputations live in ``self.info(chain)`` (a cached ``ChainInfo``), and a
  subclass may keep its own per-chain cache keyed the same way.
- ``q0`` (dof,) is the seed, already inside ``box``; do not modify it in place.
- ``target`` is a parsed ``Target`` (position, and a ``FULL`` rotation or an
  ``AXIS`` direction, or ``NONE``).
- ``box`` is a ``Box(lower, upper)`` of (dof,) arrays: joint limits (when
  ``respect_limits``) intersected with ``[q0 - max_delta, q0 + max_delta]``
  (when given); ``±inf`` where unbounded. Handle it INSIDE the iteration (so the
  error is redistributed to the free joints); the base class clips the result
  into the box once more as a safety net and recomputes the residuals if that
  clip moved anything.
- ``options`` is a ``SolveOptions`` (iterations, tolerances, strictness, and
  ``polish``: ``False`` when the call is an intermediate attempt of a
  ``MultiStartSolver``, so work that only matters for a returned result, such as
  a position-wins polish, may be skipped; ``stall``: a stricter stall rule such
  an attempt may use to give up early).
- Return the configuration and a ``SolveMeta`` with the residuals measured AT the
  returned configuration, and the status. Never return a configuration worse
  than ``q0``; on divergence return the last good one with ``Status.DIVERGED``.

The base class does the shared work once per call and cheaply: the chain, the
seed from a joint state (anything with ``.names`` and ``.position``), a mapping
or a flat (dof,) array, the box, target parsing, the reach check, building the
``Solution`` and raising ``Unreachable``, ``NoSolution`` or
``OrientationUnreachable`` with best-effort positions.

Failure policy: ``reached`` means the whole target is met (position, and the
orientation when the target has one). A solve that meets the position but not
the orientation returns its ``Solution`` (``reached=False``,
``position_reached=True``: position wins), or raises ``OrientationUnreachable``
with ``strict_orientation``. A solve that ends ``timeout``, or short of the
target because the ``max_delta`` box stopped it, returns a ``Solution`` with
``reached=False`` (the next call continues from there); a solve that ``stalled``
or ``diverged`` away from the target otherwise raises ``NoSolution``.
"""

from __future__ import annotations

import abc
import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.errors import (
    NoDofs,
    NoSolution,
    OrientationUnreachable,
    Unreachable,
)
from hilbot.kinematics.ik.core.residual import residuals
from hilbot.kinematics.ik.core.solution import Solution, SolveMeta, Status
from hilbot.kinematics.ik.core.target import Target, parse_target

Array = NDArray[np.float64]


class SolveOptions(NamedTuple):
    """The per-call options passed to ``Solver._solve``."""

    max_iterations: int
    tolerance: float  # [m]
    orientation_tolerance: float  # [rad]
    strict_orientation: bool
    respect_limits: bool
    max_delta: float | None  # [rad] or [m] per coordinate
    # False for intermediate attempts (MultiStartSolver): skip work that only matters for
    # a returned result, such as DLS's position-only polish of an unmet pose.
    polish: bool = True
    # A stricter stall rule for intermediate attempts, (accepted steps, relative
    # decrease), replacing the solver's own; ``None``: the solver's own. A restart is
    # cheaper than crawling out of a local minimum.
    stall: tuple[int, float] | None = None


class Solver(abc.ABC):
    """Base class of the IK solvers; see the module docstring for the subclass contract."""

    def __init__(self) -> None:
        self._infos: dict[int, ChainInfo] = {}
        # The last validated options: a control loop passes the same ones every cycle.
        self._options_key: tuple[Any, ...] | None = None
        self._options_value: SolveOptions | None = None

    def info(self, chain: Any) -> ChainInfo:
        """The cached per-chain precomputations for ``chain``."""
        info = self._infos.get(id(chain))
        if info is None or info.chain is not chain:
            info = ChainInfo(chain)
            self._infos[id(chain)] = info
        return info

    def solve(
        self,
        robot: Any,
        state_or_positions: Any,
        source_link: str,
        target_link: str,
        target: object,
        *,
        max_iterations: int = 50,
        tolerance: float = 1e-4,
        orientation_tolerance: float = 0.01,
        strict_orientation: bool = False,
        respect_limits: bool = True,
        initial_positions: Any = None,
        max_delta: float | None = None,
    ) -> Solution:
        """Solve for the joint positions that bring ``target_link`` to ``target``.

        Args:
            robot: the ``Robot``.
            state_or_positions: the current joint state (``.names``/``.position``), a
                mapping joint -> position, or the chain's flat (dof,) configuration.
                Joints outside the chain come back unchanged.
            source_link: the frame the target is expressed in, and the chain's start.
            target_link: the link to move.
            target: a position, ``(position, orientation)`` or a 4x4 transform (see
                ``hilbot.kinematics.ik.core.target``).
            max_iterations: iteration budget.
            tolerance: position tolerance [m].
            orientation_tolerance: orientation tolerance [rad].
            strict_orientation: raise ``OrientationUnreachable`` when the orientation is
                not met; otherwise position wins: the solution is returned with
                ``reached=False`` and ``position_reached=True``.
            respect_limits: keep every joint within its limits.
            initial_positions: the seed (same forms as ``state_or_positions``); defaults
                to ``state_or_positions``. ``max_delta`` is measured from the seed.
            max_delta: largest change of any joint coordinate in this call [rad] or [m].

        Returns:
            The ``Solution``.

        Raises:
            NoDofs: the chain has no movable joint.
            InvalidTarget: the target is malformed or not finite.
            Unreachable: the target is beyond the chain's reach.
            NoSolution: the solver stalled or diverged away from the target.
            OrientationUnreachable: ``strict_orientation`` and the orientation was not met.
            ValueError: an option is out of range.
        """
        chain = robot.path_between(source_link, target_link)
        info = self._infos.get(id(chain))
        if info is None or info.chain is not chain:
            info = self.info(chain)
        if info.dof == 0:
            raise NoDofs(chain)
        tgt = target if type(target) is Target else parse_target(target)
        key = (
            max_iterations,
            tolerance,
            orientation_tolerance,
            strict_orientation,
            respect_limits,
            max_delta,
        )
        # ``type(...) is int``: 20.0 == 20 must not reuse the options validated for 20.
        if key == self._options_key and type(max_iterations) is int:
            options = self._options_value
            assert options is not None
        else:
            options = _options(*key)
            self._options_key, self._options_value = key, options
        q_state, base = info.read(state_or_positions)
        q0 = q_state if initial_positions is None else info.read(initial_positions)[0]
        box = info.box(q0, respect_limits, max_delta)
        if not box.contains(q0):
            q0 = np.minimum(np.maximum(q0, box.lower), box.upper)
        return self._finish(chain, info, q0, tgt, box, options, base)

    def _finish(
        self,
        chain: Any,
        info: ChainInfo,
        q0: Array,
        target: Target,
        box: Box,
        options: SolveOptions,
        base: Any,
    ) -> Solution:
        """Run ``_solve``, make the result safe, build the ``Solution``, raise on failure."""
        distance = info.distance_from_base(target.point)
        if distance > info.reach + options.tolerance:
            self._raise_unreachable(chain, info, q0, target, box, options, base, distance)
        q, meta = self._solve(chain, q0, target, box, options)
        solution = self._solution(chain, info, q, target, box, options, base, meta)
        if solution.reached:
            return solution
        return self._failed(solution, q0, box, options)

    def _solution(
        self,
        chain: Any,
        info: ChainInfo,
        q: Array,
        target: Target,
        box: Box,
        options: SolveOptions,
        base: Any,
        meta: SolveMeta,
    ) -> Solution:
        residual, orientation = meta.residual, meta.orientation_residual
        safe = q
        if not box.contains(q):
            safe = np.minimum(np.maximum(q, box.lower), box.upper)
            residual, orientation = residuals(chain, safe, target)
        position_reached = residual <= options.tolerance
        reached = position_reached and (
            orientation is None or orientation <= options.orientation_tolerance
        )
        return Solution(
            safe,
            meta.iterations,
            residual,
            orientation,
            reached,
            meta.status,
            base,
            info.to_dict,
            position_reached,
        )

    def _failed(self, solution: Solution, q0: Array, box: Box, options: SolveOptions) -> Solution:
        """Decide whether an unreached solve is returned or raised."""
        if solution.position_reached:
            # Position met, orientation not: position wins, unless strict_orientation.
            if not options.strict_orientation:
                return solution
            assert solution.orientation_residual is not None
            raise OrientationUnreachable(
                solution.orientation_residual,
                options.orientation_tolerance,
                solution.positions,
                solution,
            )
        if solution.status is Status.TIMEOUT:
            return solution
        if options.max_delta is not None and _delta_binding(solution.q, q0, box, options):
            return solution
        raise NoSolution(solution.positions, solution)

    def _raise_unreachable(
        self,
        chain: Any,
        info: ChainInfo,
        q0: Array,
        target: Target,
        box: Box,
        options: SolveOptions,
        base: Any,
        distance: float,
    ) -> None:
        """Stretch towards the target (position only) and raise ``Unreachable``.

        A target farther than ``_FAR`` is stretched for through a stand-in on the
        same ray at ``_FAR``: the arm points the same way, and the solver's squared
        errors stay finite for any ``Target`` (even one built without ``parse_target``).
        """
        point = Target(target.point)
        if distance > _FAR:
            point = Target(_towards(info.base_origin, target.point, _FAR))
        q, meta = self._solve(chain, q0, point, box, options._replace(strict_orientation=False))
        solution = self._solution(chain, info, q, point, box, options, base, meta)
        raise Unreachable(target, info.reach, distance, solution.positions, solution)

    @abc.abstractmethod
    def _solve(
        self, chain: Any, q0: Array, target: Target, box: Box, options: SolveOptions
    ) -> tuple[Array, SolveMeta]:
        """Iterate from ``q0`` towards ``target`` inside ``box``; see the module docstring."""


_FAR = 1e6  # [m] beyond this a stretch aims at a stand-in point on the same ray


def _towards(
    base: Array, point: tuple[float, float, float], distance: float
) -> tuple[float, float, float]:
    """The point ``distance`` from ``base`` on the ray to ``point`` (computed without overflow)."""
    d = [p - b for p, b in zip(point, base.tolist(), strict=True)]
    scale = max(map(abs, d))
    unit = [v / scale for v in d]
    norm = math.hypot(*unit)
    x, y, z = (float(b) + distance * u / norm for b, u in zip(base.tolist(), unit, strict=True))
    return (x, y, z)


def _options(
    max_iterations: int,
    tolerance: float,
    orientation_tolerance: float,
    strict_orientation: bool,
    respect_limits: bool,
    max_delta: float | None,
) -> SolveOptions:
    """Validate the options (cheaply) and pack them."""
    check_options(max_iterations, tolerance, orientation_tolerance, max_delta)
    return SolveOptions(
        max_iterations,
        float(tolerance),
        float(orientation_tolerance),
        bool(strict_orientation),
        bool(respect_limits),
        None if max_delta is None else float(max_delta),
    )


def check_options(
    max_iterations: int,
    tolerance: float,
    orientation_tolerance: float,
    max_delta: float | None,
    *,
    delta_name: str = "max_delta",
) -> None:
    """Raise ``ValueError`` naming the first option of a solve call that is out of range.

    Every solver's call options: an iteration budget, the two tolerances and the
    optional bound on each coordinate's change (called ``delta_name`` in the message).
    """
    if not (isinstance(max_iterations, int) and max_iterations >= 1):
        raise ValueError(f"max_iterations must be an int >= 1, got {max_iterations!r}")
    if not tolerance > 0.0 or not math.isfinite(tolerance):
        raise ValueError(f"tolerance must be a finite positive distance [m], got {tolerance!r}")
    if not orientation_tolerance > 0.0 or not math.isfinite(orientation_tolerance):
        raise ValueError(
            "orientation_tolerance must be a finite positive angle [rad], "
            f"got {orientation_tolerance!r}"
        )
    if max_delta is not None and (not max_delta > 0.0 or not math.isfinite(max_delta)):
        raise ValueError(f"{delta_name} must be None or a finite positive step, got {max_delta!r}")


def _delta_binding(q: Array, q0: Array, box: Box, options: SolveOptions) -> bool:
    """Whether some coordinate sits on a ``max_delta`` bound (not on a joint limit)."""
    assert options.max_delta is not None
    margin = 1e-9 + 1e-6 * options.max_delta
    at_delta = np.abs(q - q0) >= options.max_delta - margin
    return bool(at_delta.any())


__all__ = ["Box", "SolveOptions", "Solver", "check_options"]
