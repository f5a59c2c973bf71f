"""Joint position limits as a box on the step, with a gain (as mink's ConfigurationLimit)."""

from __future__ import annotations

import numpy as np

from hilbot.kinematics.ik.qp.limits.limit import Constraint, Limit, LimitContext, check_positive


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
        q = context.q
        if self.margin:
            lower = (context.lower + self.margin - q) * self.gain
            upper = (context.upper - self.margin - q) * self.gain
        else:
            lower = (context.lower - q) * self.gain
            upper = (context.upper - q) * self.gain
        # Past a limit (or inside its margin): staying put stays allowed, going further not.
        np.maximum(upper, 0.0, out=upper)
        np.minimum(lower, 0.0, out=lower)
        return Constraint(lower=lower, upper=upper)

    def __repr__(self) -> str:
        return f"ConfigurationLimit(gain={self.gain}, min_distance_from_limits={self.margin})"
