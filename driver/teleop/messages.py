"""Teleop messages on the wire: topics, payload models, parsing and rejections, sans I/O.

Each input topic carries one JSON object, defined by the pydantic models below
(the shipped JSON Schema files are generated from them; see ``docs/teleop.md``):

- ``target/<chain>``: ``{"seq", "position", "orientation"?, "stamp"?, "ttl"?, "sender"?}``
- ``joints/target``: ``{"seq", "positions": {joint: value}, "stamp"?, "ttl"?, "sender"?}``
- ``cmd``: ``{"seq"?, "command", "stamp"?, "ttl"?, "sender"?}``

:func:`parse` turns a payload into a :class:`PoseTarget`, :class:`JointTarget`
or :class:`CommandMessage`, or raises :class:`MessageRejected` carrying a
:class:`Rejection` (reason, detail, topic, seq). Nothing here touches the
network or the robot.

The other direction is here too: :func:`state_body` and :func:`status_payload`
turn runtime state into the JSON of the ``state`` and ``status`` topics.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StringConstraints,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from hilbot._compat import StrEnum
from hilbot.driver.runtime.targets import MAX_COORDINATE_M, MAX_DIRECTION_COMPONENT, MAX_JOINT_VALUE
from hilbot.kinematics.spatial import matrix_to_quat, rpy_to_matrix
from hilbot.kinematics.tolerances import MIN_DIRECTION_NORM

# Why a teleop message was dropped: the reasons, the record and the exception.


class RejectReason(StrEnum):
    """Why a message was dropped; the ``reason`` field on the ``error`` topic."""

    OVERSIZED = "oversized"
    NOT_JSON = "not_json"
    INVALID = "invalid"  # wrong type, size, missing or unknown field
    NON_FINITE = "non_finite"
    UNKNOWN_TOPIC = "unknown_topic"
    UNKNOWN_CHAIN = "unknown_chain"
    UNKNOWN_JOINT = "unknown_joint"
    UNKNOWN_COMMAND = "unknown_command"
    STALE_SEQ = "stale_seq"  # older than or equal to the last accepted seq
    EXPIRED = "expired"
    FUTURE_STAMP = "future_stamp"
    RETAINED = "retained"  # a retained target or command is never acted on
    REFUSED = "refused"  # well-formed, but the runtime refused it
    NOT_LEASE_HOLDER = "not_lease_holder"  # another sender holds the robot's lease


@dataclass(frozen=True, slots=True)
class Rejection:
    """A dropped message: what was wrong, where, and which ``seq`` it carried."""

    reason: RejectReason
    detail: str
    topic: str
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the ``error`` topic payload (without the counters)."""
        return {
            "reason": self.reason.value,
            "detail": self.detail,
            "topic": self.topic,
            "seq": self.seq,
        }


class MessageRejected(ValueError):
    """Raised by ``parse`` and the freshness filter; carries the :class:`Rejection`."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason.value}: {rejection.detail} ({rejection.topic})")
        self.rejection = rejection


class Invalid(Exception):
    """Internal to parsing: a payload is wrong; ``parse`` turns it into a :class:`Rejection`.

    Attributes:
        reason: why the payload is dropped.
        detail: what was wrong, naming the field.
        seq: the payload's ``seq`` when it was readable, else None.
    """

    def __init__(self, reason: RejectReason, detail: str, seq: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.seq = seq


def refusal_reason(exc: BaseException) -> RejectReason:
    """The reason to report for a target the runtime refused: the same as MQTT's own check.

    ``set_target`` validates at the door with the parser's rules, so a target that slipped
    past the parser (or came from elsewhere) is reported with the reason the parser would
    have given (``invalid``, ``non_finite``, ``unknown_chain``, ``unknown_joint``); anything
    else the runtime refuses is ``refused``.
    """
    from hilbot.driver.runtime.errors import InvalidTarget, UnknownChain, UnknownJoint

    if isinstance(exc, InvalidTarget):
        return RejectReason(exc.reason.value)
    if isinstance(exc, UnknownChain):
        return RejectReason.UNKNOWN_CHAIN
    if isinstance(exc, UnknownJoint):
        return RejectReason.UNKNOWN_JOINT
    return RejectReason.REFUSED


# Teleop input payloads as pydantic models: the one definition of what each topic accepts.
#
# :func:`~hilbot.driver.teleop.messages.parse` validates with these models and the
# shipped JSON Schema files are generated from them
# (``python -m hilbot.driver.teleop.schema --write``), so the two cannot drift apart.
# What a JSON Schema cannot say (a quaternion of zero length, a joint the robot does
# not have) is checked by ``parse`` after validation.
#
# The models validate the Python objects the JSON decoder returns, in strict mode
# (no ``"1"`` for 1, no ``true`` for 1), and every number must be finite.

#: Largest accepted ``seq`` (the largest integer a JSON double holds exactly).
MAX_SEQ = 2**53 - 1
#: Bounds that keep hostile payloads cheap to reject.
MAX_JOINTS = 64
MAX_NAME_LENGTH = 64
# The coordinate, joint and direction bounds are the Python API's (``set_target``
# validates with them at the door), so both entry points refuse the same values.
#: Largest roll, pitch or yaw [rad]: 159 turns; beyond, an angle is a typo or an attack.
MAX_ANGLE_RAD = 1000.0

#: Tags of the unions below; :mod:`~hilbot.driver.teleop.messages` leaves
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


# Pydantic validation errors of a teleop payload, as a reason and a one-line detail.

#: Fields whose value is a tagged union: the tag that follows them in a path is left out.
_UNION_FIELDS = frozenset({"position", "orientation", "axis"})
_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "a boolean",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
}
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
#: Numbers smaller than this are shown as sent (up to 17 digits: any seq, any value in range).
_EXACT_INT = 10**17


def invalid_from(exc: ValidationError, allowed: Sequence[str]) -> Invalid:
    """Turn the first error of a payload's validation into an :class:`Invalid`.

    Args:
        exc: what pydantic raised validating the payload.
        allowed: the payload's top-level fields (in the order to name them when one is
            unknown).
    """
    error = exc.errors(include_url=False)[0]
    kind = error["type"]
    value = error.get("input")
    if kind == "finite_number":
        return Invalid(RejectReason.NON_FINITE, f"{_where(error['loc'])} is {value}")
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        # Every int a float can hold passes: this one is too large and overflows to infinity.
        return Invalid(
            RejectReason.NON_FINITE,
            f"{_where(error['loc'])} is {number_text(value)}, too large: it overflows to infinity",
        )
    if kind == "enum" and isinstance(value, str):
        known = ", ".join(c.value for c in CommandName)
        return Invalid(
            RejectReason.UNKNOWN_COMMAND,
            f"unknown command {value[:MAX_NAME_LENGTH]!r}; known: {known}",
        )
    return Invalid(RejectReason.INVALID, _detail(error, allowed))


def _detail(error: ErrorDetails, allowed: Sequence[str]) -> str:
    loc = error["loc"]
    where = _where(loc)
    kind = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    value = error.get("input")
    if kind == "missing":
        return f"missing field {where!r}"
    if kind == "extra_forbidden":
        detail = f"unknown field {where!r}"
        return detail + (f"; allowed: {', '.join(allowed)}" if len(loc) == 1 else "")
    if kind in _EXPECTED:
        return f"{where} must be {_EXPECTED[kind]}, got {json_kind(value)}"
    if kind in ("too_short", "too_long"):
        return _size(where, ctx)
    bound = next((k for k in _BOUNDS if k in ctx), None)
    if bound is not None:
        limit = ctx[bound]
        return f"{where} must be {_BOUNDS[bound]} {limit}, got {_beyond(value, bound, limit)}"
    if kind in ("vector_form", "orientation_form"):
        return f"{where} {error['msg']}, got {json_kind(value)}"
    if kind == "string_too_long":
        return f"{where} must be at most {ctx['max_length']} characters long"
    if kind == "enum":
        return f"{where} must be a string, got {json_kind(value)}"
    return f"{where}: {error['msg']}" if where else error["msg"]


def _size(where: str, ctx: dict[str, Any]) -> str:
    low, high, actual = ctx.get("min_length"), ctx.get("max_length"), ctx["actual_length"]
    if ctx.get("field_type") == "List":  # every list in the payloads has a fixed length
        return f"{where} needs {low if low is not None else high} numbers, got {actual}"
    if actual == 0:
        return f"{where} is empty"
    if high is not None and actual > high:
        return f"{where} has {actual} entries, at most {high}"
    return f"{where} has {actual} entries, at least {low}"


def _where(loc: Sequence[int | str]) -> str:
    """Dotted path of a field, ``orientation.axis[2]``, without union tags."""
    path = ""
    previous: int | str | None = None
    for item in loc:
        if isinstance(item, int):
            path += f"[{item}]"
        elif item == "[key]":
            path += " (the name)"
        elif not (item in UNION_TAGS and previous in _UNION_FIELDS):
            name = item[:MAX_NAME_LENGTH]  # a joint name is the sender's text
            path += f".{name}" if path else name
        previous = item
    return path


def number_text(value: object) -> str:
    """A number as an error detail shows it: as sent, or in 6 digits when it is huge.

    ``1e+300`` and ``1.11111e+160`` instead of hundreds of digits; an integer of up to 17
    digits (every ``seq``) is exact. Anything else is its ``str``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        # Decimal, not float: an int can be beyond any float (and past str()'s 4300 digits).
        if abs(value) < _EXACT_INT:
            return str(value)
        mantissa, _, exponent = f"{Decimal(value):.6g}".partition("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"  # as float's .6g: 1e+20
    return repr(value) if abs(value) < _EXACT_INT else f"{value:.6g}"


def _beyond(value: Any, bound: str, limit: Any) -> str:
    """``value`` in as few digits (6 or more) as still show it past ``limit``: 1500.6."""
    if not isinstance(value, float) or not isinstance(limit, int | float):
        return number_text(value)
    for digits in range(6, 18):
        text = f"{value:.{digits}g}"
        if _VIOLATES[bound](float(text), limit):
            return text
    return repr(value)


_VIOLATES: dict[str, Callable[[float, float], bool]] = {
    "ge": lambda value, limit: value < limit,
    "gt": lambda value, limit: value <= limit,
    "le": lambda value, limit: value > limit,
    "lt": lambda value, limit: value >= limit,
}


def json_kind(value: Any) -> str:
    """JSON name of a value's type, for error messages: ``a string``, ``null``, ``a number``.

    One function for every detail that names a type (a payload that is not an object, a
    field of the wrong type), so none says Python's ``str`` or ``NoneType``.
    """
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
        case dict():
            return f"an object with the fields {', '.join(value) or 'none'}"
    return type(value).__name__


# The topic names of one robot, under its prefix.


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic names under ``prefix`` (``hilbot/<robot>`` by default)."""

    prefix: str

    def target(self, chain: str) -> str:
        """Pose targets of ``chain`` (input)."""
        return f"{self.prefix}/target/{chain}"

    @property
    def targets(self) -> str:
        """Subscription filter of every chain's targets."""
        return f"{self.prefix}/target/+"

    @property
    def joints(self) -> str:
        """Joint targets (input)."""
        return f"{self.prefix}/joints/target"

    @property
    def cmd(self) -> str:
        """Commands (input, QoS 1)."""
        return f"{self.prefix}/cmd"

    @property
    def state(self) -> str:
        """Telemetry (output)."""
        return f"{self.prefix}/state"

    @property
    def status(self) -> str:
        """Online/offline, mode (output, retained; the last will)."""
        return f"{self.prefix}/status"

    @property
    def error(self) -> str:
        """Rejections (output)."""
        return f"{self.prefix}/error"

    def is_target(self, topic: str) -> bool:
        """Whether ``topic`` carries targets (pose or joint), which are conflated."""
        return topic == self.joints or (
            topic.startswith(self.prefix + "/target/") and topic.count("/") == self.depth + 1
        )

    @property
    def depth(self) -> int:
        """Number of ``/`` separators before a chain name's level."""
        return self.prefix.count("/") + 1


__all__ = [
    "MAX_COORDINATE_M",
    "MAX_JOINTS",
    "MAX_JOINT_VALUE",
    "MAX_NAME_LENGTH",
    "MAX_SEQ",
    "CommandMessage",
    "CommandName",
    "Header",
    "JointTarget",
    "Message",
    "MessageRejected",
    "Orientation",
    "PoseTarget",
    "RejectReason",
    "Rejection",
    "Vocabulary",
    "parse",
]

_Payload = TypeVar("_Payload", bound=Wire)

#: A quaternion or axis shorter than this has no direction: the IK package's bound
#: (``Runtime.set_target`` parses by the same tolerances).
_MIN_NORM = MIN_DIRECTION_NORM


@dataclass(frozen=True, slots=True)
class Header:
    """Fields every input message may carry.

    Attributes:
        seq: sequence number, monotonic per topic and sender (None only on ``cmd``).
        stamp: sender's wall-clock time [s since the Unix epoch], or None.
        ttl: lifetime [s] counted from ``stamp``, or None for the configured default.
        sender: free-form sender id; a restarted sender should pick a new one.
    """

    seq: int | None
    stamp: float | None
    ttl: float | None
    sender: str


#: Orientation as the runtime takes it: tool axis (3,), quaternion (4,) w-first,
#: or rotation matrix (3, 3); None for position only.
Orientation = NDArray[np.float64] | None


@dataclass(frozen=True, slots=True)
class PoseTarget:
    """An end-effector target for one chain."""

    header: Header
    chain: str
    position: NDArray[np.float64]  # (3,) in [m]
    orientation: Orientation
    sampled: float | None = None  # the sender's sample time [s, its own clock]

    def runtime_target(self) -> NDArray[np.float64] | tuple[NDArray[np.float64], Orientation]:
        """Return the target in the form ``Runtime.set_target`` takes."""
        if self.orientation is None:
            return self.position
        return (self.position, self.orientation)


@dataclass(frozen=True, slots=True)
class JointTarget:
    """Joint-space targets [rad or m] by joint name."""

    header: Header
    positions: Mapping[str, float]
    sampled: float | None = None  # the sender's sample time [s, its own clock]


@dataclass(frozen=True, slots=True)
class CommandMessage:
    """A lifecycle command."""

    header: Header
    command: CommandName


Message = PoseTarget | JointTarget | CommandMessage


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What the robot has: the names an input message may refer to."""

    prefix: str
    chains: frozenset[str]
    joints: frozenset[str]
    max_payload_bytes: int = 4096


def parse(topic: str, payload: bytes, vocabulary: Vocabulary) -> Message:
    """Parse one input message.

    Args:
        topic: full MQTT topic, under ``vocabulary.prefix``.
        payload: raw message bytes.
        vocabulary: the robot's prefix, chains and joints, and the size limit.

    Returns:
        The validated message; freshness (``seq``, ``stamp``/``ttl``) is checked
        separately by :class:`~hilbot.driver.teleop.bridge.FreshnessFilter`.

    Raises:
        MessageRejected: the message is malformed or names something unknown.
    """
    seq: int | None = None
    try:
        if len(payload) > vocabulary.max_payload_bytes:
            raise Invalid(
                RejectReason.OVERSIZED,
                f"{len(payload)} bytes, the limit is {vocabulary.max_payload_bytes}",
            )
        kind, chain = _route(topic, vocabulary)
        data = _decode(payload)
        seq = _peek_seq(data)
        return _BUILDERS[kind](chain, data, vocabulary)
    except Invalid as exc:
        seq = seq if seq is not None else exc.seq
        raise MessageRejected(Rejection(exc.reason, exc.detail, topic, seq)) from None


def _route(topic: str, vocabulary: Vocabulary) -> tuple[str, str]:
    head = vocabulary.prefix + "/"
    if not topic.startswith(head):
        raise Invalid(RejectReason.UNKNOWN_TOPIC, f"not under the prefix {vocabulary.prefix!r}")
    rest = topic[len(head) :]
    if rest in ("cmd", "joints/target"):
        return rest, ""
    if rest.startswith("target/") and rest.count("/") == 1:
        chain = rest[len("target/") :]
        if chain not in vocabulary.chains:
            known = ", ".join(sorted(vocabulary.chains)) or "none"
            raise Invalid(RejectReason.UNKNOWN_CHAIN, f"unknown chain {chain!r}; known: {known}")
        return "target", chain
    raise Invalid(
        RejectReason.UNKNOWN_TOPIC,
        f"unknown topic {rest!r}; inputs are target/<chain>, joints/target and cmd",
    )


def _reject_constant(name: str) -> float:
    raise Invalid(RejectReason.NON_FINITE, f"{name} is not a JSON number (no NaN or Infinity)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) < len(pairs):  # the common case costs one dict and one comparison
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise Invalid(RejectReason.INVALID, f"duplicate field {key!r}")
            seen.add(key)
    return result


#: One decoder for all messages (``json.loads`` with hooks builds a new one per call).
#: Python's decoder, not pydantic's: it finds duplicate fields, which the schema
#: cannot see and another reader of the same payload may resolve differently.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys)


def _decode(payload: bytes) -> dict[str, Any]:
    try:
        data = _DECODER.decode(payload.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise Invalid(RejectReason.NOT_JSON, f"not JSON: {exc}") from None
    except Invalid as exc:
        if exc.reason is RejectReason.NON_FINITE:
            exc.seq = _seq_despite_non_finite(payload)
        raise
    if not isinstance(data, dict):
        raise Invalid(RejectReason.INVALID, f"expected a JSON object, got {json_kind(data)}")
    return data


def _seq_despite_non_finite(payload: bytes) -> int | None:
    """The ``seq`` of a payload that is JSON but for a NaN or Infinity literal."""
    try:
        data = json.loads(payload, parse_constant=lambda _: None)
    except (ValueError, RecursionError):
        return None
    return _peek_seq(data) if isinstance(data, dict) else None


def _peek_seq(data: Mapping[str, Any]) -> int | None:
    seq = data.get("seq")
    if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= MAX_SEQ:
        return seq
    return None


def _validated(model: type[_Payload], data: dict[str, Any]) -> _Payload:
    # The model's validator itself: model_validate adds a Python call per message.
    try:
        body: _Payload = model.__pydantic_validator__.validate_python(data)
    except ValidationError as exc:
        raise invalid_from(exc, _FIELDS[model]) from None
    return body


#: Top-level fields of each payload, named when a message has an unknown one.
_FIELDS: dict[type[Wire], tuple[str, ...]] = {
    model: tuple(sorted(model.model_fields))
    for model in (PoseTargetPayload, JointTargetPayload, CommandPayload)
}


def _pose_target(chain: str, data: dict[str, Any], vocabulary: Vocabulary) -> Message:
    body = _validated(PoseTargetPayload, data)
    header = Header(body.seq, body.stamp, body.ttl, body.sender)
    return PoseTarget(
        header, chain, _array(body.position), _orientation(body.orientation), body.sampled
    )


def _joint_target(chain: str, data: dict[str, Any], vocabulary: Vocabulary) -> Message:
    body = _validated(JointTargetPayload, data)
    header = Header(body.seq, body.stamp, body.ttl, body.sender)
    return JointTarget(header, _joint_positions(body.positions, vocabulary), body.sampled)


def _command(chain: str, data: dict[str, Any], vocabulary: Vocabulary) -> Message:
    body = _validated(CommandPayload, data)
    return CommandMessage(Header(body.seq, body.stamp, body.ttl, body.sender), body.command)


_BUILDERS: dict[str, Callable[[str, dict[str, Any], Vocabulary], Message]] = {
    "target": _pose_target,
    "joints/target": _joint_target,
    "cmd": _command,
}


def _array(vector: Position | list[float]) -> NDArray[np.float64]:
    return np.array(_components(vector))


def _components(vector: Position | Direction | list[float]) -> tuple[float, ...]:
    if isinstance(vector, list):
        return tuple(vector)
    return (vector.x, vector.y, vector.z)


def _orientation(value: Quaternion | ToolAxis | RollPitchYaw | None) -> Orientation:
    if value is None:
        return None
    if type(value) is Quaternion:
        return _unit((value.w, value.x, value.y, value.z), "orientation")
    if type(value) is ToolAxis:
        return _unit(_components(value.axis), "orientation.axis")
    assert isinstance(value, RollPitchYaw)
    # URDF convention: fixed axes, Rz(yaw) @ Ry(pitch) @ Rx(roll).
    return rpy_to_matrix((value.roll, value.pitch, value.yaw))


def _unit(values: tuple[float, ...], where: str) -> NDArray[np.float64]:
    # math.hypot scales before squaring: exact, and finite for any finite vector.
    norm = math.hypot(*values)
    if norm < _MIN_NORM:
        raise Invalid(RejectReason.INVALID, f"{where} has zero length")
    result: NDArray[np.float64] = np.array(values) / norm
    return result


def _joint_positions(positions: dict[str, float], vocabulary: Vocabulary) -> dict[str, float]:
    for name in positions:
        if name not in vocabulary.joints:
            known = ", ".join(sorted(vocabulary.joints)) or "none"
            raise Invalid(
                RejectReason.UNKNOWN_JOINT,
                f"unknown joint {name[:MAX_NAME_LENGTH]!r}; known: {known}",
            )
    return positions


# Telemetry payloads: runtime state -> JSON for the ``state`` and ``status`` topics.

#: Floats are rounded to this many decimals: 1 µm / 1 µrad / 1 µs, and shorter JSON.
DECIMALS = 6


def to_jsonable(value: Any) -> Any:
    """Convert a state value to JSON types.

    Dataclasses and named tuples become objects with their field names, enums
    their values, numpy arrays nested lists, and non-finite floats ``null``
    (JSON has no NaN).
    """
    match value:
        case None | bool() | str():
            return value
        case enum.Enum():
            return to_jsonable(value.value)
        case int() | np.integer():
            return int(value)
        case float() | np.floating():
            number = float(value)
            return round(number, DECIMALS) if math.isfinite(number) else None
        case np.ndarray():
            return [to_jsonable(v) for v in value.tolist()]
        case Mapping():
            return {str(to_jsonable(k)): to_jsonable(v) for k, v in value.items()}
        case tuple() if hasattr(value, "_fields"):
            return {f: to_jsonable(getattr(value, f)) for f in value._fields}
        case list() | tuple() | set() | frozenset():
            return [to_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return str(value)


def encode(payload: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes of an already-jsonable mapping."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()


def pose_json(pose: Any) -> dict[str, Any]:
    """``{"position": [x, y, z], "orientation": {"w", "x", "y", "z"}}`` of a 4 x 4 pose."""
    matrix = np.asarray(pose, dtype=np.float64)
    w, x, y, z = matrix_to_quat(matrix[:3, :3]).tolist()
    return {
        "position": to_jsonable(matrix[:3, 3]),
        "orientation": to_jsonable({"w": w, "x": x, "y": y, "z": z}),
    }


def joints_json(joints: Any) -> dict[str, Any] | None:
    """Joint state as parallel arrays in ``names`` order, or None before the first read."""
    if joints is None:
        return None
    return {
        "names": list(joints.names),
        "position": to_jsonable(joints.position),
        "velocity": to_jsonable(joints.velocity),
        "effort": to_jsonable(joints.effort),
        "effort_unit": to_jsonable(joints.effort_unit),
        "temperature": to_jsonable(joints.temperature),
        "hardware_errors": [flag.describe() for flag in joints.hardware_errors],
    }


def state_body(state: Any) -> dict[str, Any]:
    """The ``state`` topic payload without ``stamp`` and ``teleop`` (see ``docs/teleop.md``).

    Args:
        state: ``runtime.state()``, a ``hilbot.driver.runtime.state.RuntimeState``; a
            mapping is taken to be a body already (from the teleop worker's parent).
    """
    if isinstance(state, Mapping):
        return dict(state)
    return {
        "mode": to_jsonable(state.mode),
        "joints": joints_json(state.joints),
        "command": to_jsonable(state.command),
        "chains": {name: pose_json(pose) for name, pose in state.poses.items()},
        "faults": to_jsonable(state.faults),
        "watchdog_tripped": state.watchdog_tripped,
        "homing": state.homing,
        "clamp_counts": to_jsonable(state.clamp_counts),
        "stats": to_jsonable(state.stats),
        "glitches": dict(state.glitches),
        "last_stop": _stop_json(state.last_stop, state.joints),
    }


def _stop_json(stop: Any, joints: Any) -> dict[str, Any] | None:
    """The last controlled stop, as the state topic carries it."""
    if stop is None:
        return None
    names = tuple(joints.names) if joints is not None else ()
    j = int(stop.distance.argmax()) if stop.distance.size else 0
    return {
        "reason": stop.reason,
        "duration": round(float(stop.duration), DECIMALS),
        "time_bound": round(float(stop.time_bound), DECIMALS),
        "joint": names[j] if j < len(names) else None,
        "distance": round(float(stop.distance[j]), DECIMALS) if stop.distance.size else 0.0,
        "distance_bound": (
            round(float(stop.distance_bound[j]), DECIMALS) if stop.distance.size else 0.0
        ),
        "within_bounds": bool(stop.within_bounds),
    }


def status_payload(
    *,
    online: bool,
    mode: str | None,
    faults: Any,
    stamp: float,
    retained_estop: Mapping[str, Any] | None = None,
    identity: Mapping[str, Any] | None = None,
) -> bytes:
    """The retained ``status`` payload (also the last will, with ``online`` false).

    ``retained_estop`` (None: there is none) says that a retained ``estop`` on
    ``cmd`` e-stopped the robot, and with which command to clear it. ``identity``
    holds the driver's ``instance``, ``started`` and ``takeover`` fields
    (:meth:`hilbot.driver.teleop.bridge.Instance.fields`).
    """
    return encode(
        {
            "online": online,
            "mode": mode,
            "armed": mode == "armed",
            "estopped": mode == "estopped",
            "faults": to_jsonable(faults),
            "stamp": round(stamp, DECIMALS),
            "retained_estop": None if retained_estop is None else dict(retained_estop),
            **(identity or {}),
        }
    )
