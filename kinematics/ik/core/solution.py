"""The result of one IK solve: positions of every joint plus how the solve went."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import StrEnum


class Status(StrEnum):
    """How a solve ended.

    ``converged``: position (and orientation, when asked) within tolerance.
    ``stalled``: the error stopped decreasing before reaching the tolerance.
    ``diverged``: no step reduced the error; the last good configuration is returned.
    ``timeout``: the iteration (or time) budget ran out while still improving.
    """

    CONVERGED = "converged"
    STALLED = "stalled"
    DIVERGED = "diverged"
    TIMEOUT = "timeout"


class SolveMeta(NamedTuple):
    """What ``Solver._solve`` reports besides the configuration.

    Attributes:
        iterations: iterations run.
        residual: position error norm at the returned configuration [m].
        orientation_residual: orientation error angle [rad], ``None`` without orientation.
        status: how the solve ended.
    """

    iterations: int
    residual: float
    orientation_residual: float | None
    status: Status


class Solution:
    """One solve's result.

    Attributes:
        q: (dof,) the chain's flat configuration, in ``Chain.jacobian_columns`` order.
        iterations: iterations run.
        residual: position error norm [m].
        orientation_residual: orientation error [rad] (angle between the z-axes for a
            tool-axis target), ``None`` for position-only targets.
        reached: the target is met: the position within ``tolerance`` and, when the
            target has an orientation (a rotation or a tool axis), the orientation within
            ``orientation_tolerance`` too.
        position_reached: the position is within ``tolerance`` (the orientation may be
            best effort: "position wins" on an arm that cannot take the orientation).
        status: how the solve ended (see ``Status``).
        positions: every joint's position: the given state or mapping with the chain's
            joints replaced (built on first access, so tight loops that read ``q`` pay
            nothing for it).
    """

    __slots__ = (
        "_base",
        "_positions",
        "_to_dict",
        "iterations",
        "orientation_residual",
        "position_reached",
        "q",
        "reached",
        "residual",
        "status",
    )

    def __init__(
        self,
        q: NDArray[np.float64],
        iterations: int,
        residual: float,
        orientation_residual: float | None,
        reached: bool,
        status: Status,
        base: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
        to_dict: Callable[[NDArray[np.float64]], Mapping[str, Any]],
        position_reached: bool | None = None,
    ) -> None:
        self.q = q
        self.iterations = iterations
        self.residual = residual
        self.orientation_residual = orientation_residual
        self.reached = reached
        # Not given: known only when the whole target is met.
        self.position_reached = reached if position_reached is None else position_reached
        self.status = status
        self._base = base
        self._to_dict = to_dict
        self._positions: dict[str, Any] | None = None

    @property
    def positions(self) -> dict[str, Any]:
        """Every joint's position (a copy you may keep and modify)."""
        if self._positions is None:
            base = self._base() if callable(self._base) else self._base
            merged = dict(base)
            merged.update(self._to_dict(self.q))
            self._positions = merged
        return dict(self._positions)

    def __repr__(self) -> str:
        orientation = (
            "None" if self.orientation_residual is None else f"{self.orientation_residual:.3g}"
        )
        return (
            f"Solution(status={self.status.value!r}, reached={self.reached}, "
            f"iterations={self.iterations}, residual={self.residual:.3g}, "
            f"orientation_residual={orientation}, q={np.array2string(self.q, precision=4)})"
        )
