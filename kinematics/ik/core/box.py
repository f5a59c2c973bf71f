"""The per-call box on a chain's flat configuration."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

_le = operator.le


class Box:
    """Per-call bounds on the flat configuration, (dof,) each, ``±inf`` where unbounded.

    It is the joint limits (when respected) intersected with ``q0 ± max_delta``.
    The bounds are also kept as lists of floats: for the handful of joints of an IK
    chain, scalar comparisons beat numpy's per-call cost, and a ``ChainInfo`` reuses
    one ``Box`` for its limits on every call.

    Attributes:
        lower: (dof,) lower bounds.
        upper: (dof,) upper bounds.
        lower_list: ``lower`` as floats.
        upper_list: ``upper`` as floats.
        bounded: some side of some coordinate is finite.
    """

    __slots__ = ("bounded", "lower", "lower_list", "upper", "upper_list")

    def __init__(self, lower: NDArray[np.float64], upper: NDArray[np.float64]) -> None:
        self.lower = lower
        self.upper = upper
        self.lower_list: list[float] = lower.tolist()
        self.upper_list: list[float] = upper.tolist()
        self.bounded = not all(map(math.isinf, self.lower_list + self.upper_list))

    def __iter__(self) -> Iterator[NDArray[np.float64]]:
        """``lower, upper = box``."""
        return iter((self.lower, self.upper))

    def __repr__(self) -> str:
        return f"Box(lower={self.lower!r}, upper={self.upper!r})"

    def contains(self, q: NDArray[np.float64]) -> bool:
        """Whether every coordinate of ``q`` is within the bounds (``False`` for NaN)."""
        values = q.tolist()
        if len(values) != len(self.lower_list):
            raise ValueError(f"expected {len(self.lower_list)} coordinates, got {len(values)}")
        # ``map`` over C comparisons: no Python frame per coordinate (NaN compares False).
        return all(map(_le, self.lower_list, values)) and all(map(_le, values, self.upper_list))


def delta_bounds(
    q0: NDArray[np.float64],
    max_delta: float,
    limits: tuple[NDArray[np.float64], NDArray[np.float64]] | None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``q0 ± max_delta``, intersected with ``limits`` (lower, upper) when given.

    A seed outside the limits may only move back towards them, by at most
    ``max_delta`` (so the call never jumps). ``q0`` is (dof,) or (B, dof).
    """
    lo, hi = q0 - max_delta, q0 + max_delta
    if limits is not None:
        lo = np.minimum(np.maximum(lo, limits[0]), q0)
        hi = np.maximum(np.minimum(hi, limits[1]), q0)
    return lo, hi
