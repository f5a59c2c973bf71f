"""Per-chain facts the solvers precompute once: names, bounds, reach, state index maps."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.box import Box, delta_bounds
from hilbot.kinematics.ik.core.errors import MAX_POSITION, InvalidPositions
from hilbot.kinematics.joint import JointType

Array = NDArray[np.float64]

#: Joint types every solver can handle as one scalar coordinate.
SCALAR = frozenset({JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC})


class ChainInfo:
    """What a solver needs to know about a ``Chain``, computed once.

    Attributes:
        chain: the chain.
        dof: its number of columns.
        names: (dof,) joint name of each column (repeated for multi-DoF joints).
        scalar: every column is its own scalar joint (no planar or floating joint).
        lower: (dof,) lower bounds (``-inf`` where unbounded).
        upper: (dof,) upper bounds (``+inf`` where unbounded).
        base_origin: (3,) origin of the first movable joint in the source frame.
        reach: upper bound of the distance from ``base_origin`` the target link can
            reach [m] (``inf`` with planar or floating joints or unbounded prismatics).
        limits: the ``Box`` of the joint limits (reused by every call that respects them).
    """

    def __init__(self, chain: Any) -> None:
        self.chain = chain
        columns = list(chain.jacobian_columns)
        self.dof = len(columns)
        self.names = tuple(_name(joint) for joint, _ in columns)
        self.scalar = len(set(self.names)) == self.dof and all(
            _joint_type(j) in SCALAR for j in chain.joints if _dof(j) > 0
        )
        self.lower = np.asarray(chain.lower, dtype=np.float64).reshape(self.dof).copy()
        self.upper = np.asarray(chain.upper, dtype=np.float64).reshape(self.dof).copy()
        self.base_origin, self.reach = _reach(chain)
        self._base = tuple(self.base_origin.tolist())
        self._unbounded = Box(np.full(self.dof, -np.inf), np.full(self.dof, np.inf))
        self.limits = Box(self.lower, self.upper)
        self._shape = (self.dof,)
        self._state_index: dict[tuple[str, ...], NDArray[np.intp]] = {}
        self.lower_list: list[float] = self.lower.tolist()
        self.upper_list: list[float] = self.upper.tolist()

    def to_dict(self, q: Array) -> dict[str, Any]:
        """Chain joints -> positions (floats; poses for planar/floating joints)."""
        if self.scalar:
            return dict(zip(self.names, q.tolist(), strict=True))
        return dict(self.chain.q_to_dict(q))

    def read(self, value: Any) -> tuple[Array, Any]:
        """Flat (dof,) configuration from a state, a mapping or an array, plus the base.

        The base is what ``Solution.positions`` starts from (joints outside the
        chain come back unchanged): a mapping or a callable building one.

        Raises:
            InvalidPositions: a chain coordinate is NaN, infinite or beyond ``MAX_POSITION``
                (a ``ValueError`` too).
            ValueError: an array has the wrong shape.
            KeyError: a mapping lacks a chain joint.
            TypeError: ``value`` is none of the accepted forms.
        """
        q, base = self._read(value)
        check_positions(q, self.names)
        return q, base

    def _read(self, value: Any) -> tuple[Array, Any]:
        if type(value) is np.ndarray and value.dtype == np.float64 and value.shape == self._shape:
            return value.copy(), EMPTY
        if isinstance(value, np.ndarray):
            q = np.asarray(value, dtype=np.float64)
            if q.shape != (self.dof,):
                raise ValueError(
                    f"a flat configuration for this chain needs shape ({self.dof},), "
                    f"got {q.shape}; columns: {', '.join(self.names)}"
                )
            return q.copy(), {}
        if isinstance(value, Mapping):
            return self._from_mapping(value), value
        names = getattr(value, "names", None)
        position = getattr(value, "position", None)
        if names is None or position is None:
            raise TypeError(
                "state_or_positions must be a joint state (.names, .position), a mapping "
                f"joint -> position or a flat (dof,) array, got {type(value).__name__}"
            )
        return self._from_state(tuple(names), np.asarray(position, dtype=np.float64))

    def _from_state(self, names: tuple[str, ...], position: Array) -> tuple[Array, Any]:
        values = position.tolist()
        index = self._state_index.get(names)
        if index is None:
            if not self.scalar or not set(self.names) <= set(names):
                mapping = dict(zip(names, values, strict=True))
                return self._from_mapping(mapping), mapping
            index = np.array([names.index(n) for n in self.names], dtype=np.intp)
            self._state_index[names] = index
        return position[index], _Lazy(names, values)

    def _from_mapping(self, mapping: Mapping[str, Any]) -> Array:
        if self.scalar:
            try:
                return np.array([float(mapping[n]) for n in self.names])
            except KeyError:
                pass  # let the chain name the missing joint
        return np.asarray(self.chain.q_from(mapping), dtype=np.float64).reshape(self.dof)

    def box(self, q0: Array, respect_limits: bool, max_delta: float | None) -> Box:
        """The per-call box: limits (if respected) ∩ ``[q0 - max_delta, q0 + max_delta]``.

        A seed outside the limits with ``max_delta`` set may only move back towards
        the limits, by at most ``max_delta`` (so the call never jumps).
        """
        if max_delta is None:
            return self.limits if respect_limits else self._unbounded
        limits = (self.lower, self.upper) if respect_limits else None
        return Box(*delta_bounds(q0, max_delta, limits))

    def distance_from_base(self, point: tuple[float, float, float]) -> float:
        """Distance [m] from the first movable joint to ``point``.

        ``math.hypot`` never overflows on the way: a finite point 1e155 m away is
        1e155 m away (``inf`` only beyond the largest float), not an ``OverflowError``.
        """
        bx, by, bz = self._base
        return math.hypot(point[0] - bx, point[1] - by, point[2] - bz)

    def random(self, rng: np.random.Generator, box: Box, span: float = math.pi) -> Array:
        """A uniform random configuration in ``box`` (unbounded sides use ``±span``)."""
        lo = np.where(np.isfinite(box.lower), box.lower, -span)
        hi = np.where(np.isfinite(box.upper), box.upper, span)
        lo = np.minimum(lo, hi)
        return np.asarray(rng.uniform(lo, hi), dtype=np.float64)


EMPTY: Mapping[str, Any] = MappingProxyType({})


def check_positions(q: Array, names: tuple[str, ...]) -> None:
    """Raise ``InvalidPositions`` unless every coordinate of ``q`` is finite and sane.

    ``q`` is (dof,) or (B, dof); ``names`` names its columns.
    """
    if q.ndim == 1:
        # Python on a few floats is cheaper than numpy reductions; NaN and inf make the
        # sum non-finite (as does a huge sum that overflows: told apart below).
        values = q.tolist()
        if math.isfinite(sum(values)) and max(map(abs, values), default=0.0) <= MAX_POSITION:
            return
    elif q.size == 0 or float(np.abs(q).max()) <= MAX_POSITION:  # NaN compares False
        return
    flat = q.reshape(-1, len(names))
    bad = ~np.isfinite(flat).all(axis=0)
    if bad.any():
        raise InvalidPositions([names[i] for i in np.flatnonzero(bad)], "finite")
    big = (np.abs(flat) > MAX_POSITION).any(axis=0)
    raise InvalidPositions(
        [names[i] for i in np.flatnonzero(big)], f"within ±{MAX_POSITION:.0e} (rad or m)"
    )


class _Lazy:
    """A state's positions as a mapping, built only when a solution's positions are read."""

    __slots__ = ("names", "values")

    def __init__(self, names: tuple[str, ...], values: list[float]) -> None:
        self.names = names
        self.values = values

    def __call__(self) -> dict[str, float]:
        return dict(zip(self.names, self.values, strict=True))


def _name(joint: Any) -> str:
    return str(getattr(joint, "name", joint))


def _joint_type(joint: Any) -> JointType:
    return JointType(getattr(joint, "type", JointType.REVOLUTE))


def _dof(joint: Any) -> int:
    return int(getattr(joint, "dof", 1))


def _reach(chain: Any) -> tuple[Array, float]:
    """Origin of the first movable joint (source frame) and the reach from it [m].

    Revolute joints keep the distance between consecutive joint origins fixed, so
    the reach is the sum of those distances plus the prismatic travel (triangle
    inequality); planar and floating joints make it unbounded.
    """
    pose = np.eye(4)
    base: Array | None = None
    reach = 0.0
    for joint in getattr(chain, "path", chain.joints):
        pose = pose @ joint.origin
        if joint.type is JointType.FIXED:
            continue
        if base is None:
            base = pose[:3, 3].copy()
        else:
            reach += float(np.linalg.norm(pose[:3, 3]))
        if joint.type in (JointType.PLANAR, JointType.FLOATING):
            reach = math.inf
        elif joint.type is JointType.PRISMATIC:
            lo, hi = joint.bounds()
            reach += max(abs(lo), abs(hi))
        pose = np.eye(4)
    if base is None:
        return np.zeros(3), 0.0
    reach += float(np.linalg.norm(pose[:3, 3]))  # last movable joint -> target link
    return base, reach
