"""Task values for ``MultiTaskSolver.solve_tasks``: frozen, validated at construction.

Primary tasks (solved first, to tolerance): ``FrameTask``, ``RelativeFrameTask``.
Secondary tasks (weighted, in the primary tasks' null space): ``ElbowHint``,
``PostureTask``, ``RestTask``, ``ManipulabilityTask``, ``JointLimitTask`` and the
soft part of ``SelfCollision`` (whose margin is also a hard limit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.target import Target, parse_target
from hilbot.kinematics.ik.qp.limits.geometry import Capsule

Array = NDArray[np.float64]


def _weight(owner: str, name: str, value: float, *, allow_zero: bool = True) -> None:
    ok = value >= 0.0 if allow_zero else value > 0.0
    if not (isinstance(value, int | float) and math.isfinite(value) and ok):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{owner}: {name} must be a finite number {bound}, got {value!r}")


def _link(owner: str, name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{owner}: {name} must be a link name, got {value!r}")


@dataclass(frozen=True)
class FrameTask:
    """Bring ``link`` to ``target``, expressed in ``source_link`` (default: the solver root).

    Attributes:
        link: the link to move (a hand, a foot).
        target: any IK target form (position, ``(position, orientation)``, 4x4).
        source_link: the frame of ``target``; a moving link makes this a relative goal.
        position_weight: weight of the position rows [1/m].
        orientation_weight: weight of the orientation rows [1/rad].
        parsed: the parsed ``Target`` (computed).
    """

    link: str
    target: Any
    source_link: str | None = None
    position_weight: float = 1.0
    orientation_weight: float = 0.3
    parsed: Target = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _link("FrameTask", "link", self.link)
        if self.source_link is not None:
            _link("FrameTask", "source_link", self.source_link)
        _weight("FrameTask", "position_weight", self.position_weight)
        _weight("FrameTask", "orientation_weight", self.orientation_weight)
        if self.position_weight == 0.0 and self.orientation_weight == 0.0:
            raise ValueError("FrameTask: position_weight and orientation_weight are both 0")
        object.__setattr__(self, "parsed", parse_target(self.target))


@dataclass(frozen=True)
class RelativeFrameTask:
    """Hold ``link_a`` at ``relative_pose`` in the frame of ``link_b`` (two hands, one object).

    Attributes:
        link_a: the link placed.
        link_b: the link it is placed relative to.
        relative_pose: pose of ``link_a`` in ``link_b``'s frame (any target form).
        position_weight: weight of the position rows.
        orientation_weight: weight of the orientation rows.
        parsed: the parsed ``Target`` (computed).
    """

    link_a: str
    link_b: str
    relative_pose: Any
    position_weight: float = 1.0
    orientation_weight: float = 0.3
    parsed: Target = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _link("RelativeFrameTask", "link_a", self.link_a)
        _link("RelativeFrameTask", "link_b", self.link_b)
        if self.link_a == self.link_b:
            raise ValueError(f"RelativeFrameTask: link_a and link_b are both {self.link_a!r}")
        _weight("RelativeFrameTask", "position_weight", self.position_weight)
        _weight("RelativeFrameTask", "orientation_weight", self.orientation_weight)
        object.__setattr__(self, "parsed", parse_target(self.relative_pose))

    def as_frame_task(self) -> FrameTask:
        """The equivalent ``FrameTask`` with a moving source."""
        return FrameTask(
            self.link_a,
            self.parsed,
            self.link_b,
            self.position_weight,
            self.orientation_weight,
        )


@dataclass(frozen=True)
class ElbowHint:
    """Pull an intermediate link (an elbow) towards ``position`` in the root frame.

    Attributes:
        link: the intermediate link.
        position: (3,) where it should be [m].
        weight: weight of the hint.
    """

    link: str
    position: npt.ArrayLike
    weight: float = 0.3

    def __post_init__(self) -> None:
        _link("ElbowHint", "link", self.link)
        _weight("ElbowHint", "weight", self.weight, allow_zero=False)
        point = np.asarray(self.position, dtype=np.float64)
        if point.shape != (3,) or not np.isfinite(point).all():
            raise ValueError(f"ElbowHint: position must be a finite (3,) point, got {point!r}")
        point = point.copy()
        point.flags.writeable = False
        object.__setattr__(self, "position", point)


@dataclass(frozen=True)
class PostureTask:
    """Attract the listed joints towards a home pose (joint name -> position).

    Attributes:
        pose: joint name -> position [rad or m] (scalar joints).
        weight: weight of the attraction.
    """

    pose: Mapping[str, float]
    weight: float = 0.05

    def __post_init__(self) -> None:
        _weight("PostureTask", "weight", self.weight, allow_zero=False)
        pose = dict(self.pose)
        for name, value in pose.items():
            if not (isinstance(value, int | float) and math.isfinite(value)):
                raise ValueError(f"PostureTask: position of {name!r} must be finite, got {value!r}")
        object.__setattr__(self, "pose", pose)


@dataclass(frozen=True)
class RestTask:
    """Stay near the configuration the call started from.

    Attributes:
        weight: weight of the attraction to the start.
    """

    weight: float = 0.01

    def __post_init__(self) -> None:
        _weight("RestTask", "weight", self.weight, allow_zero=False)


@dataclass(frozen=True)
class ManipulabilityTask:
    """Climb the gradient of ``log sqrt(det(J J'))`` of ``link``'s position Jacobian.

    Attributes:
        link: the link whose manipulability is raised.
        weight: gain of the gradient step.
    """

    link: str
    weight: float = 0.01

    def __post_init__(self) -> None:
        _link("ManipulabilityTask", "link", self.link)
        _weight("ManipulabilityTask", "weight", self.weight, allow_zero=False)


@dataclass(frozen=True)
class JointLimitTask:
    """Push joints out of the band of width ``margin`` inside each limit.

    Attributes:
        weight: weight of the push.
        margin: band width [rad or m].
    """

    weight: float = 0.1
    margin: float = 0.1

    def __post_init__(self) -> None:
        _weight("JointLimitTask", "weight", self.weight, allow_zero=False)
        _weight("JointLimitTask", "margin", self.margin, allow_zero=False)


@dataclass(frozen=True)
class SelfCollision:
    """Keep capsule pairs at least ``margin`` apart (a hard limit) and push them apart softly.

    Attributes:
        pairs: ``(geometry_a, geometry_b)`` capsule or sphere pairs.
        margin: hard minimum distance between surfaces [m].
        weight: weight of the soft push inside ``detection_distance`` (0: hard limit only).
        detection_distance: pairs closer than this get a row [m].
    """

    pairs: Sequence[tuple[Capsule, Capsule]]
    margin: float = 0.02
    weight: float = 0.1
    detection_distance: float = 0.1

    def __post_init__(self) -> None:
        pairs = tuple((a, b) for a, b in self.pairs)
        for a, b in pairs:
            if not (isinstance(a, Capsule) and isinstance(b, Capsule)):
                raise ValueError(f"SelfCollision: pairs must hold Capsule geometries, got {(a, b)}")
        if not pairs:
            raise ValueError("SelfCollision: no pairs given")
        _weight("SelfCollision", "margin", self.margin)
        _weight("SelfCollision", "weight", self.weight)
        _weight("SelfCollision", "detection_distance", self.detection_distance, allow_zero=False)
        if self.detection_distance <= self.margin:
            raise ValueError("SelfCollision: detection_distance must be larger than margin")
        object.__setattr__(self, "pairs", pairs)


Task = (
    FrameTask
    | RelativeFrameTask
    | ElbowHint
    | PostureTask
    | RestTask
    | ManipulabilityTask
    | JointLimitTask
    | SelfCollision
)

__all__ = [
    "ElbowHint",
    "FrameTask",
    "JointLimitTask",
    "ManipulabilityTask",
    "PostureTask",
    "RelativeFrameTask",
    "RestTask",
    "SelfCollision",
    "Task",
]
