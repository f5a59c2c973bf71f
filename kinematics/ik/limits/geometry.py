"""Collision geometry attached to links: capsules and spheres, and their closest points."""

from __future__ import annotations

import math
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
