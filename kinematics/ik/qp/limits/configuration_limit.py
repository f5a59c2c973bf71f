"""Joint position limits as a box on the step, with a gain (as mink's ConfigurationLimit)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.qp.limits.limit import Constraint, Limit, LimitContext, check_positive

Array = NDArray[np.float64]


class ConfigurationLimit(Limit):
    """Keep ``q + dq`` inside the joint limits, approaching them geometrically.

    The step is bounded by ``gain * (lower - q) <= dq <= gain * (upper - q)``. With
    ``gain < 1`` a joint that heads for a limit covers only that fraction of the
    remaining distance per iteration, so it never overshoots and never bounces off
    the limit (the oscillation seen with a post-solve clip). A seed already outside
    a limit may stay or move back towards it, never further out.

    Args:
        gain: fraction of the remaining distance a step may cover, in (0, 1].
        min_distance_from_limits: margin kept from each limit [rad or m], >= 0.
    """

    def __init__(self, gain: float = 0.95, min_distance_from_limits: float = 0.0) -> None:
        gain = check_positive("gain", gain)
        if gain > 1.0:
            raise ValueError(f"gain must be in (0, 1], got {gain!r}")
        self.gain = gain
        self.margin = check_positive(
            "min_distance_from_limits", min_distance_from_limits, allow_zero=True
        )

    def constraint(self, context: LimitContext) -> Constraint:
        """Box bounds on ``dq`` from the distance to each limit."""
        lower, upper = self.step_bounds(context.lower, context.upper, context.q)
        return Constraint(lower=lower, upper=upper)

    def step_bounds(self, lower: Array, upper: Array, q: Array) -> tuple[Array, Array]:
        """Bounds on ``dq`` at ``q`` ((n,) or (B, n)) from the joint limits ``lower, upper``."""
        if self.margin:
            low = (lower + self.margin - q) * self.gain
            high = (upper - self.margin - q) * self.gain
        else:
            low = (lower - q) * self.gain
            high = (upper - q) * self.gain
        # Past a limit (or inside its margin): staying put stays allowed, going further not.
        np.maximum(high, 0.0, out=high)
        np.minimum(low, 0.0, out=low)
        return low, high

    def __repr__(self) -> str:
        return f"ConfigurationLimit(gain={self.gain}, min_distance_from_limits={self.margin})"
