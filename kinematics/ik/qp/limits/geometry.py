"""Collision geometry attached to links: capsules and spheres, and their closest points."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

Array = NDArray[np.float64]


def _point(name: str, value: npt.ArrayLike) -> Array:
    array = np.asarray(value, dtype=np.float64)
    if array.shape != (3,) or not np.isfinite(array).all():
        raise ValueError(f"{name} must be a finite (3,) point in the link frame, got {value!r}")
    array = array.copy()
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class Capsule:
    """A capsule on a link: the points within ``radius`` of the segment ``a``-``b``.

    Attributes:
        link: the link it moves with.
        radius: its radius [m], > 0.
        a: (3,) one end of the axis, in the link frame [m].
        b: (3,) the other end, in the link frame [m] (equal to ``a`` for a sphere).
    """

    link: str
    radius: float
    a: Array = field(default_factory=lambda: np.zeros(3))
    b: Array = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self) -> None:
        if not isinstance(self.link, str) or not self.link:
            raise ValueError(f"link must be a non-empty link name, got {self.link!r}")
        if not (math.isfinite(self.radius) and self.radius > 0.0):
            raise ValueError(f"radius of the geometry on {self.link!r} must be > 0 [m]")
        object.__setattr__(self, "radius", float(self.radius))
        object.__setattr__(self, "a", _point(f"{self.link}: a", self.a))
        object.__setattr__(self, "b", _point(f"{self.link}: b", self.b))

    def segment(self, pose: Array) -> tuple[Array, Array]:
        """The axis end points in the frame ``pose`` (4, 4) maps the link into."""
        rot, pos = pose[:3, :3], pose[:3, 3]
        return rot @ self.a + pos, rot @ self.b + pos


def Sphere(link: str, radius: float, center: npt.ArrayLike = (0.0, 0.0, 0.0)) -> Capsule:
    """A sphere on a link: a capsule whose axis is the single point ``center``."""
    c = np.asarray(center, dtype=np.float64)
    return Capsule(link, radius, c, c)


def closest_points(p1: Array, q1: Array, p2: Array, q2: Array) -> tuple[Array, Array]:
    """Closest points between segments ``p1-q1`` and ``p2-q2`` (Ericson, RTCD 5.1.9)."""
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = float(d1 @ d1)
    e = float(d2 @ d2)
    f = float(d2 @ r)
    eps = 1e-12
    if a <= eps and e <= eps:
        return p1, p2
    if a <= eps:
        s, t = 0.0, min(max(f / e, 0.0), 1.0)
    else:
        c = float(d1 @ r)
        if e <= eps:
            s, t = min(max(-c / a, 0.0), 1.0), 0.0
        else:
            b = float(d1 @ d2)
            denom = a * e - b * b
            s = min(max((b * f - c * e) / denom, 0.0), 1.0) if denom > eps else 0.0
            t = (b * s + f) / e
            if t < 0.0:
                s, t = min(max(-c / a, 0.0), 1.0), 0.0
            elif t > 1.0:
                s, t = min(max((b - c) / a, 0.0), 1.0), 1.0
    return p1 + s * d1, p2 + t * d2


def closest_points_batch(p1: Array, q1: Array, p2: Array, q2: Array) -> tuple[Array, Array]:
    """Closest points between segments, vectorised over pairs: all arguments (P, 3).

    The same case analysis as :func:`closest_points`, on arrays.
    """
    eps = 1e-12
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = np.einsum("ij,ij->i", d1, d1)
    e = np.einsum("ij,ij->i", d2, d2)
    f = np.einsum("ij,ij->i", d2, r)
    c = np.einsum("ij,ij->i", d1, r)
    b = np.einsum("ij,ij->i", d1, d2)
    a_safe = np.where(a > eps, a, 1.0)
    e_safe = np.where(e > eps, e, 1.0)
    denom = a * e - b * b
    s = np.where(denom > eps, np.clip((b * f - c * e) / np.where(denom > eps, denom, 1.0), 0, 1), 0)
    t = (b * s + f) / e_safe
    low = t < 0.0
    high = t > 1.0
    s = np.where(
        low, np.clip(-c / a_safe, 0, 1), np.where(high, np.clip((b - c) / a_safe, 0, 1), s)
    )
    t = np.clip(t, 0.0, 1.0)
    # Degenerate segments (points).
    point_a = a <= eps
    point_b = e <= eps
    s = np.where(point_a, 0.0, np.where(point_b, np.clip(-c / a_safe, 0, 1), s))
    t = np.where(
        point_a, np.where(point_b, 0.0, np.clip(f / e_safe, 0, 1)), np.where(point_b, 0.0, t)
    )
    return p1 + s[:, None] * d1, p2 + t[:, None] * d2


class PairGeometry:
    """Capsule pairs compiled for evaluation: each capsule is placed once per configuration.

    Attributes:
        capsules: the distinct capsules.
        first: (P,) index into ``capsules`` of each pair's first geometry.
        second: (P,) index of each pair's second geometry.
        radii: (P,) sum of the two radii of each pair [m].
    """

    def __init__(self, pairs: tuple[tuple[Capsule, Capsule], ...]) -> None:
        index: dict[int, int] = {}
        capsules: list[Capsule] = []
        for pair in pairs:
            for capsule in pair:
                if id(capsule) not in index:
                    index[id(capsule)] = len(capsules)
                    capsules.append(capsule)
        self.capsules = tuple(capsules)
        self.first = np.array([index[id(a)] for a, _ in pairs], dtype=np.intp)
        self.second = np.array([index[id(b)] for _, b in pairs], dtype=np.intp)
        self.radii = np.array([a.radius + b.radius for a, b in pairs])
        self._local = np.array([[c.a, c.b] for c in capsules])  # (K, 2, 3)

    def closest(self, pose: Callable[[str], Array]) -> tuple[Array, Array, Array]:
        """Closest points ``(pa (P, 3), pb (P, 3))`` and surface distances (P,) [m].

        Args:
            pose: link -> (4, 4) pose in the common frame.
        """
        world = np.empty_like(self._local)
        for k, capsule in enumerate(self.capsules):
            transform = pose(capsule.link)
            world[k] = self._local[k] @ transform[:3, :3].T + transform[:3, 3]
        i, j = self.first, self.second
        pa, pb = closest_points_batch(world[i, 0], world[i, 1], world[j, 0], world[j, 1])
        gap = pa - pb
        distance = np.sqrt(np.einsum("ij,ij->i", gap, gap)) - self.radii
        return pa, pb, distance
