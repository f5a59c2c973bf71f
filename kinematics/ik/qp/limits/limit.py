"""The ``Limit`` base class and what limits see: a ``LimitContext`` and a ``Constraint``.

A limit turns the current configuration into hard constraints on the step ``dq``
(tangent coordinates, one per Jacobian column) of one QP iteration: either box
bounds ``lower <= dq <= upper`` (cheap, solved by the box path) or general rows
``G dq <= h`` (the general path). Limits never clip a result after the fact.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


class LimitContext(Protocol):
    """What a limit may read about the configuration the QP linearises around.

    Attributes:
        q: (nv,) the current configuration (flat, column order).
        lower: (nv,) joint lower limits (``-inf`` where unbounded).
        upper: (nv,) joint upper limits (``+inf`` where unbounded).
        velocity_limit: (nv,) joint velocity limits from the model [rad/s or m/s].
        names: (nv,) the joint name of each column.
    """

    q: Array
    lower: Array
    upper: Array
    velocity_limit: Array
    names: tuple[str, ...]

    def pose(self, link: str) -> Array:
        """Pose (4, 4) of ``link`` in the solver's common frame."""

    def jacobian(self, link: str) -> Array:
        """Jacobian (6, nv) of ``link``'s origin in the common frame (linear rows first)."""


class Constraint(NamedTuple):
    """Constraints on ``dq``; unused parts are ``None``.

    Attributes:
        lower: (nv,) box lower bounds, or None.
        upper: (nv,) box upper bounds, or None.
        g: (m, nv) inequality rows, or None.
        h: (m,) right-hand sides, or None.
    """

    lower: Array | None = None
    upper: Array | None = None
    g: Array | None = None
    h: Array | None = None


class Limit(abc.ABC):
    """A hard limit of a QP step; subclasses build a ``Constraint`` for a context."""

    @abc.abstractmethod
    def constraint(self, context: LimitContext) -> Constraint:
        """Constraints on the step ``dq`` from the configuration ``context.q``."""


def check_limits(limits: Iterable[object]) -> tuple[Limit, ...]:
    """Return ``limits`` as a tuple, or raise ``TypeError`` at the first that is not a ``Limit``."""
    chosen: list[Limit] = []
    for limit in limits:
        if not isinstance(limit, Limit):
            raise TypeError(f"limits must be Limit objects, got {type(limit).__name__}")
        chosen.append(limit)
    return tuple(chosen)


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` naming ``name``."""
    number = float(value)
    ok = number >= 0.0 if allow_zero else number > 0.0
    if not (ok and np.isfinite(number)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return number
