"""The ``lead`` section of a leader arm's config: how its joints drive a follower's."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

Finite = Annotated[float, Field(allow_inf_nan=False)]
Range = tuple[Finite, Finite]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class JointLead(_Frozen):
    """How one leader joint drives a follower joint.

    ``follower = offset + scale * leader``; or, with ``range`` and ``follower_range``
    (a gripper trigger and the follower's jaw), the leader's range mapped linearly onto
    the follower's and clipped to it.

    Attributes:
        to: the follower joint (default: the same name).
        scale: multiplies the leader's position.
        offset: added after scaling [rad or m].
        range: the leader joint's range ``[lower, upper]`` (with ``follower_range``).
        follower_range: what ``range`` maps onto on the follower.
    """

    to: str | None = None
    scale: Finite = 1.0
    offset: Finite = 0.0
    range: Range | None = None
    follower_range: Range | None = None

    @model_validator(mode="after")
    def _ranges(self) -> JointLead:
        if (self.range is None) != (self.follower_range is None):
            raise ValueError("range and follower_range go together")
        if self.range is not None and not self.range[0] < self.range[1]:
            raise ValueError(f"range lower {self.range[0]} must be below upper {self.range[1]}")
        if self.scale == 0.0 or not math.isfinite(self.scale):
            raise ValueError("scale must be finite and not 0")
        return self


class LeaderHold(_Frozen):
    """A light hold on one leader joint (the gripper trigger springs back to ``position``).

    The joint's servo gets torque on at ``position``; keep its push light in the
    leader's config so a finger overcomes it: current-based position control with a low
    ``current_limit`` on a Dynamixel servo (the Koch leader), a low ``torque_limit`` on a
    Feetech one (the SO-101 leader, whose STS3215 has no current mode).
    """

    joint: str
    position: Finite = 0.0


class LeadSettings(_Frozen):
    """A leader arm's ``lead`` section.

    Attributes:
        follower: the follower robot ``hilbot lead`` drives by default (``--to``).
        joints: per leader joint how it maps; joints not named map to the follower joint
            of the same name, unscaled. ``{joint: null}`` leaves a joint out.
        hold: a light hold on the trigger, or none (every joint limp).
        rate_hz: how often the leader is read and published; default the config's rate.
    """

    follower: str | None = None
    joints: dict[str, JointLead | None] = Field(default_factory=dict)
    hold: LeaderHold | None = None
    rate_hz: Annotated[float, Field(gt=0.0, le=1000.0, allow_inf_nan=False)] | None = None
