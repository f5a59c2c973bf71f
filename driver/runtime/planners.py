"""The planners the motion layer is measured against (``motion.planner``), for benchmarks.

- ``off``: each newest target goes to the safety layer as it is (the runtime before the
  motion layer: a staircase, shaped only by the safety layer's per-cycle step).
- ``linear``: from where the command is, a straight line to each new target, reached
  one estimated stream period after it arrived, then held.
- ``ruckig``: Ruckig (community edition) fed each new target as it arrives, with target
  velocity zero, stepped once a cycle within the same velocity, acceleration and jerk
  limits as the motion layer: the textbook online use of a jerk-limited generator.

Both take the joint vector the targets ask for (IK solved per arrival for pose targets)
and return this cycle's command. Neither is the default: ``stream`` (the motion layer)
is; BENCHMARKS.md compares all four.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.runtime.motion import MotionLimits


class LinearPlanner:
    """A straight line to each new target, over one estimated period."""

    def __init__(self, start: NDArray[np.float64]) -> None:
        self._from = np.array(start, dtype=np.float64)
        self._to = self._from.copy()
        self._arrived = 0.0
        self._period = 0.0
        self._out = self._from.copy()

    def step(self, desired: NDArray[np.float64], now: float) -> NDArray[np.float64]:
        """This cycle's command toward ``desired`` (a new target when it changed)."""
        if not np.array_equal(desired, self._to):
            interval = now - self._arrived
            if 0.0 < interval < 0.5:
                self._period = interval if not self._period else 0.9 * self._period + 0.1 * interval
            self._from, self._to, self._arrived = self._out.copy(), desired.copy(), now
        share = 1.0 if self._period <= 0 else min(1.0, (now - self._arrived) / self._period)
        self._out = self._from + (self._to - self._from) * share
        return self._out.copy()


class RuckigPlanner:
    """Ruckig's online trajectory, re-targeted at each new target.

    Raises:
        ImportError: the ``ruckig`` package is not installed (``pip install ruckig``).
    """

    def __init__(self, start: NDArray[np.float64], limits: MotionLimits, period: float) -> None:
        import ruckig

        n = len(limits.names)
        self._ruckig = ruckig.Ruckig(n, period)
        self._input = ruckig.InputParameter(n)
        self._output = ruckig.OutputParameter(n)
        inp = self._input
        inp.current_position = list(map(float, start))
        inp.current_velocity = [0.0] * n
        inp.current_acceleration = [0.0] * n
        inp.target_position = list(map(float, start))
        inp.target_velocity = [0.0] * n
        inp.target_acceleration = [0.0] * n
        inp.max_velocity = list(map(float, limits.velocity))
        inp.max_acceleration = list(map(float, limits.acceleration))
        inp.max_jerk = list(map(float, limits.jerk))
        self._target: NDArray[np.float64] = np.array(start, dtype=np.float64)
        self._result: Any = ruckig.Result

    def step(self, desired: NDArray[np.float64], now: float) -> NDArray[np.float64]:
        """This cycle's command: one Ruckig step toward the newest target."""
        if not np.array_equal(desired, self._target):
            self._target = desired.copy()
            self._input.target_position = list(map(float, desired))
        result = self._ruckig.update(self._input, self._output)
        if result not in (self._result.Working, self._result.Finished):
            raise RuntimeError(f"ruckig: {result}")
        self._output.pass_to_input(self._input)
        return np.array(self._output.new_position, dtype=np.float64)
