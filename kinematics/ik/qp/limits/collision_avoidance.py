"""Collision avoidance between capsule or sphere pairs, as velocity-damper rows on ``dq``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.qp.limits.geometry import Capsule, PairGeometry
from hilbot.kinematics.ik.qp.limits.limit import Constraint, Limit, LimitContext, check_positive

Array = NDArray[np.float64]


def point_jacobian(jacobian: Array, origin: Array, point: Array) -> Array:
    """Linear Jacobian (3, nv) of ``point`` rigidly attached to a link.

    ``jacobian`` (6, nv) is the link origin's; ``v_p = v_o + w x (p - o)``.
    """
    r = point - origin
    cross: Array = np.cross(jacobian[3:].T, r).T  # column i: w_i x r
    return jacobian[:3] + cross


class CollisionAvoidance(Limit):
    """Keep each pair at least ``margin`` apart (the standard velocity damper).

    For a pair at distance ``d`` (between surfaces) with unit normal ``n`` from the
    closest point on ``b`` to the one on ``a``, the row is

        ``-n' (J_a(p_a) - J_b(p_b)) dq <= gain * (d - margin)``

    so that a step may close at most ``gain`` of the remaining gap to the margin
    (the distance never crosses it in the linearisation), and a pair already
    inside the margin may only separate. Pairs farther than
    ``detection_distance`` give no row.

    Args:
        pairs: ``(geometry_a, geometry_b)`` pairs (``Capsule`` or ``Sphere``).
        margin: smallest allowed distance between surfaces [m], >= 0.
        detection_distance: pairs farther apart are ignored [m], > margin.
        gain: fraction of the gap a step may close, in (0, 1].

    Raises:
        ValueError: a bad value, or a pair of geometries on the same link.
    """

    def __init__(
        self,
        pairs: Sequence[tuple[Capsule, Capsule]],
        margin: float = 0.01,
        detection_distance: float = 0.1,
        gain: float = 0.85,
    ) -> None:
        self.pairs = tuple(pairs)
        for a, b in self.pairs:
            if not (isinstance(a, Capsule) and isinstance(b, Capsule)):
                raise ValueError(f"pairs must hold Capsule/Sphere geometries, got {(a, b)!r}")
            if a.link == b.link:
                raise ValueError(f"a collision pair needs two links, got {a.link!r} twice")
        self.margin = check_positive("margin", margin, allow_zero=True)
        self.detection_distance = check_positive("detection_distance", detection_distance)
        if self.detection_distance <= self.margin:
            raise ValueError("detection_distance must be larger than margin")
        self.gain = check_positive("gain", gain)
        if self.gain > 1.0:
            raise ValueError(f"gain must be in (0, 1], got {gain!r}")
        self.geometry = PairGeometry(self.pairs)
        self._memo: list[tuple[LimitContext, tuple[Array, Array, Array]]] = []

    @property
    def links(self) -> frozenset[str]:
        """The links the pairs involve."""
        return frozenset(g.link for pair in self.pairs for g in pair)

    def closest(self, context: LimitContext) -> tuple[Array, Array, Array]:
        """Closest points ``(pa (P, 3), pb (P, 3))`` and surface distances (P,) at ``context``.

        The last two contexts are remembered: a solver asks about the same
        configuration for the rows, the step check and the soft push.
        """
        for seen, result in self._memo:
            if seen is context:
                return result
        result = self.geometry.closest(context.pose)
        self._memo = [(context, result), *self._memo[:1]]
        return result

    def distances(self, context: LimitContext) -> list[float]:
        """Surface distance [m] of every pair at ``context.q`` (negative: penetrating)."""
        distances: list[float] = self.closest(context)[2].tolist()
        return distances

    def step_ok(self, before: LimitContext, after: LimitContext) -> bool:
        """Whether a step kept every pair out of the margin (or, if in, no closer).

        The rows are a linearisation: a long step can still cut a corner, so the
        solvers check the true distances after a step and shorten it when this fails.
        """
        tolerance = 1e-9
        d0 = self.closest(before)[2]
        d1 = self.closest(after)[2]
        bad = (d1 < self.margin - tolerance) & (d1 < d0 - tolerance)
        return not bool(bad.any())

    def rates(self, context: LimitContext, near: NDArray[np.bool_]) -> tuple[Array, Array]:
        """Distance rows ``d(distance)/dq`` (k, nv) of the pairs ``near`` and their distances."""
        pa, pb, distance = self.closest(context)
        caps = self.geometry.capsules
        rows = []
        for k in np.flatnonzero(near):
            a = caps[self.geometry.first[k]]
            b = caps[self.geometry.second[k]]
            pose_a, pose_b = context.pose(a.link), context.pose(b.link)
            gap = pa[k] - pb[k]
            centre = float(np.sqrt(gap @ gap))
            normal = gap / centre if centre > 1e-9 else _fallback_normal(pose_a, pose_b)
            ja = point_jacobian(context.jacobian(a.link), pose_a[:3, 3], pa[k])
            jb = point_jacobian(context.jacobian(b.link), pose_b[:3, 3], pb[k])
            rows.append(normal @ (ja - jb))
        if not rows:
            return np.zeros((0, context.q.shape[0])), np.zeros(0)
        return np.array(rows), distance[near]

    def constraint(self, context: LimitContext) -> Constraint:
        """One row per pair closer than ``detection_distance``."""
        distance = self.closest(context)[2]
        near = distance <= self.detection_distance
        if not near.any():
            return Constraint()
        rates, close = self.rates(context, near)
        return Constraint(g=-rates, h=self.gain * (close - self.margin))

    def __repr__(self) -> str:
        return (
            f"CollisionAvoidance(pairs={len(self.pairs)}, margin={self.margin}, "
            f"detection_distance={self.detection_distance}, gain={self.gain})"
        )


def _fallback_normal(pose_a: Array, pose_b: Array) -> Array:
    """A separating direction when the axes intersect: between the link origins, or up."""
    d = pose_a[:3, 3] - pose_b[:3, 3]
    n = float(np.linalg.norm(d))
    return d / n if n > 1e-9 else np.array([0.0, 0.0, 1.0])
