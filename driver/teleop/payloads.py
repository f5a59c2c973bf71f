"""Teleop input payloads as pydantic models: the one definition of what each topic accepts.

:func:`~hilbot.driver.teleop.messages.parse` validates with these models and the
shipped JSON Schema files are generated from them
(``python -m hilbot.driver.teleop.schema --write``), so the two cannot drift apart.
What a JSON Schema cannot say (a quaternion of zero length, a joint the robot does
not have) is checked by ``parse`` after validation.

The models validate the Python objects the JSON decoder returns, in strict mode
(no ``"1"`` for 1, no ``true`` for 1), and every number must be finite.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StringConstraints,
    Tag,
    model_validator,
)
from pydantic_core import PydanticCustomError

from hilbot._compat import StrEnum
from hilbot.driver.targets import MAX_COORDINATE_M, MAX_DIRECTION_COMPONENT, MAX_JOINT_VALUE

#: Largest accepted ``seq`` (the largest integer a JSON double holds exactly).
MAX_SEQ = 2**53 - 1
#: Bounds that keep hostile payloads cheap to reject.
MAX_JOINTS = 64
MAX_NAME_LENGTH = 64
# The coordinate, joint and direction bounds are the Python API's (``set_target``
# validates with them at the door), so both entry points refuse the same values.
#: Largest roll, pitch or yaw [rad]: 159 turns; beyond, an angle is a typo or an attack.
MAX_ANGLE_RAD = 1000.0

#: Tags of the unions below; :mod:`~hilbot.driver.teleop.payload_errors` leaves
#: them out of the field paths it reports.
UNION_TAGS = frozenset({"xyz", "list", "quaternion", "tool_axis", "rpy"})


class CommandName(StrEnum):
    """Commands accepted on the ``cmd`` topic."""

    ENABLE = "enable"
    DISABLE = "disable"
    ESTOP = "estop"
    RESET = "reset"
    HOME = "home"
    REBOOT = "reboot"
    RELEASE = "release"  # ends the sender's lease; never reaches the runtime


Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_COORDINATE_M, le=MAX_COORDINATE_M)]
Component = Annotated[
    float, Field(allow_inf_nan=False, ge=-MAX_DIRECTION_COMPONENT, le=MAX_DIRECTION_COMPONENT)
]
Angle = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_ANGLE_RAD, le=MAX_ANGLE_RAD)]
JointValue = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_JOINT_VALUE, le=MAX_JOINT_VALUE)]
Name = Annotated[str, StringConstraints(max_length=MAX_NAME_LENGTH)]


class Wire(BaseModel):
    """Base of the payload models: strict, closed, frozen."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def _form(value: Any) -> str | None:
    """Union tag of a vector: ``{"x", "y", "z"}`` or ``[x, y, z]``."""
    if isinstance(value, dict):
        return "xyz"
    if isinstance(value, list):
        return "list"
    return None


_VECTOR_FORM = Discriminator(
    _form, custom_error_type="vector_form", custom_error_message="must be {x, y, z} or [x, y, z]"
)


class Position(Wire):
    """Position [m] as {x, y, z}."""

    x: Coordinate
    y: Coordinate
    z: Coordinate


class Direction(Wire):
    """Direction [unit-less] as {x, y, z}."""

    x: Component
    y: Component
    z: Component


PositionField = Annotated[
    Annotated[Position, Tag("xyz")]
    | Annotated[list[Coordinate], Field(min_length=3, max_length=3), Tag("list")],
    _VECTOR_FORM,
    Field(
        description="Position [m] of the end effector in the chain's source frame, "
        "as {x, y, z} or [x, y, z]."
    ),
]
DirectionField = Annotated[
    Annotated[Direction, Tag("xyz")]
    | Annotated[list[Component], Field(min_length=3, max_length=3), Tag("list")],
    _VECTOR_FORM,
    Field(description="Axis as {x, y, z} or [x, y, z]."),
]


class Quaternion(Wire):
    """Unit quaternion (normalised on receipt)."""

    w: Component
    x: Component
    y: Component
    z: Component


class ToolAxis(Wire):
    """Tool axis: the direction the end effector's z axis should point to."""

    model_config = ConfigDict(
        json_schema_extra={
            "description": "Tool axis: the direction [unit-less, normalised on receipt] the "
            "end effector's z axis should point to; rotation about it is free."
        }
    )

    axis: DirectionField


class RollPitchYaw(Wire):
    """Fixed-axis roll, pitch, yaw [rad] (URDF convention: Rz(yaw) Ry(pitch) Rx(roll))."""

    roll: Angle
    pitch: Angle
    yaw: Angle


def _orientation_form(value: Any) -> str | None:
    """Union tag of an orientation, by its first distinguishing field."""
    if isinstance(value, dict):
        if "axis" in value:
            return "tool_axis"
        if "w" in value:
            return "quaternion"
        if "roll" in value:
            return "rpy"
    return None


OrientationField = Annotated[
    Annotated[Quaternion, Tag("quaternion")]
    | Annotated[ToolAxis, Tag("tool_axis")]
    | Annotated[RollPitchYaw, Tag("rpy")],
    Discriminator(
        _orientation_form,
        custom_error_type="orientation_form",
        custom_error_message="must be null, {w, x, y, z}, {axis: [x, y, z]} or {roll, pitch, yaw}",
    ),
]

_SEQ_HELP = "Sequence number, increasing per topic and sender; an older or repeated one is dropped."
#: JSON Schema of the model validator below: a ttl (not null) needs a stamp (not null).
_TTL_NEEDS_STAMP: dict[str, Any] = {
    "if": {"properties": {"ttl": {"type": "number"}}, "required": ["ttl"]},
    "then": {"properties": {"stamp": {"type": "number"}}, "required": ["stamp"]},
}


class Envelope(Wire):
    """Fields every input message may carry (``seq`` is required but on ``cmd``)."""

    stamp: (
        Annotated[
            float,
            Field(
                allow_inf_nan=False,
                ge=0.0,
                description="Send time [s since the Unix epoch, UTC]. A message older than "
                "its ttl, or stamped in the future beyond the tolerated clock skew, is dropped.",
            ),
        ]
        | None
    ) = None
    ttl: (
        Annotated[
            float,
            Field(
                allow_inf_nan=False,
                gt=0.0,
                description="Lifetime [s] counted from stamp (needs stamp). Without it, a "
                "stamped message lives for the configured default_ttl_s.",
            ),
        ]
        | None
    ) = None
    sender: Annotated[
        Name,
        Field(
            description="Sender id; seq is tracked per sender. A restarted sender should use "
            "a new id (or wait 2 s)."
        ),
    ] = ""

    @model_validator(mode="after")
    def _ttl_needs_stamp(self) -> Envelope:
        # Without the send time the receiver cannot tell how long the message travelled.
        if self.ttl is not None and self.stamp is None:
            raise PydanticCustomError(
                "ttl_needs_stamp", "ttl needs stamp (the send time, Unix seconds)"
            )
        return self


Seq = Annotated[int, Field(ge=0, le=MAX_SEQ, description=_SEQ_HELP)]
#: A target's sample time: the motion layer places it on the stream's timeline by it.
Sampled = (
    Annotated[
        float,
        Field(
            allow_inf_nan=False,
            ge=-1e12,
            le=1e12,
            description="When the sender sampled this target [s, on the sender's own clock, "
            "any epoch]. Optional: with it the motion layer times the stream by the samples "
            "(free of network jitter); without it, by arrival.",
        ),
    ]
    | None
)


class PoseTargetPayload(Envelope):
    """A pose target on <prefix>/target/<chain>. Only the newest target counts."""

    model_config = ConfigDict(title="pose_target", json_schema_extra=_TTL_NEEDS_STAMP)

    seq: Seq
    sampled: Sampled = None
    position: PositionField
    orientation: Annotated[
        OrientationField | None,
        Field(
            description="null (position only), a quaternion {w,x,y,z}, a tool axis "
            "{axis: [x,y,z]}, or {roll, pitch, yaw}."
        ),
    ] = None


class JointTargetPayload(Envelope):
    """Joint targets on <prefix>/joints/target, by joint name."""

    model_config = ConfigDict(
        title="joint_target",
        json_schema_extra={
            "description": "Joint targets on <prefix>/joints/target, by joint name [rad, or m "
            "for prismatic joints]. Only the newest message counts: put every joint you want "
            "to hold in each one.",
            **_TTL_NEEDS_STAMP,
        },
    )

    seq: Seq
    sampled: Sampled = None
    positions: Annotated[dict[Name, JointValue], Field(min_length=1, max_length=MAX_JOINTS)]


class CommandPayload(Envelope):
    """A command on <prefix>/cmd."""

    model_config = ConfigDict(
        title="command",
        json_schema_extra={
            "description": "A command on <prefix>/cmd (publish with QoS 1). seq is optional "
            "here; an estop is always honoured.",
            **_TTL_NEEDS_STAMP,
        },
    )

    seq: Seq | None = None
    # Lax for this one field: strict mode takes only CommandName members, not their strings.
    command: Annotated[CommandName, Strict(False)]
