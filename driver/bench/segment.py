"""The time-function interface of a scenario step: ``Segment``, its ``Target`` and context."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray


class Target(NamedTuple):
    """One target: joint positions [rad], or a chain's end-effector position [m]."""

    joints: Mapping[str, float] | None = None
    chain: str | None = None
    position: NDArray[np.float64] | None = None  # (3,) in the chain's source frame


@dataclass(frozen=True)
class StepContext:
    """Where a step starts and what bounds it.

    Attributes:
        joints: current joint positions [rad] (the last command, or measured).
        ee: current end-effector position per chain [m], (3,) each.
        limits: joint limits ``(lower, upper)`` [rad].
        home: the config's home pose.
        base_dir: folder that relative file names in the scenario are resolved against.
    """

    joints: Mapping[str, float]
    ee: Mapping[str, NDArray[np.float64]]
    limits: Mapping[str, tuple[float, float]]
    home: Mapping[str, float]
    base_dir: Path = Path()


def min_jerk(s: float) -> float:
    """Minimum-jerk time scaling of ``s`` in [0, 1]: zero velocity and acceleration at both ends."""
    s = min(max(s, 0.0), 1.0)
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


class Segment(abc.ABC):
    """A step as a function of time ``t`` [s] from the step's start, for ``duration`` [s]."""

    duration: float

    @abc.abstractmethod
    def at(self, t: float) -> Target:
        """Return the target at ``t`` (clamped to the segment's duration)."""
