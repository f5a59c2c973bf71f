"""Joint velocity limits over one control period, as a box on the step."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hilbot.kinematics.ik.qp.limits.limit import Constraint, Limit, LimitContext, check_positive


class VelocityLimit(Limit):
    """Bound every step by ``|dq_i| <= v_i * dt``.

    Args:
        velocities: joint name -> velocity limit [rad/s or m/s]; joints not listed
            use the model's URDF velocity limit. ``None``: the model's limits only.
        dt: the control period [s] a step spans.
    """

    def __init__(self, velocities: Mapping[str, float] | None = None, dt: float = 0.01) -> None:
        self.dt = check_positive("dt", dt)
        self.velocities = {
            name: check_positive(f"velocity of {name!r}", v)
            for name, v in (velocities or {}).items()
        }
        self._cache: tuple[tuple[str, ...], np.ndarray] | None = None

    def constraint(self, context: LimitContext) -> Constraint:
        """Symmetric box bounds ``±v dt`` (unbounded where no limit is known)."""
        cached = self._cache
        if cached is None or cached[0] != context.names:
            v = np.array(
                [
                    self.velocities.get(name, float(context.velocity_limit[i]))
                    for i, name in enumerate(context.names)
                ]
            )
            cached = (context.names, v * self.dt)
            self._cache = cached
        bound = cached[1]
        return Constraint(lower=-bound, upper=bound.copy())

    def __repr__(self) -> str:
        return f"VelocityLimit(velocities={self.velocities!r}, dt={self.dt})"
