"""Teleop messages: parse and validate MQTT payloads, sans I/O.

Each input topic carries one JSON object (see ``docs/teleop.md`` and the JSON
Schema files in ``hilbot/driver/teleop/schema``):

- ``target/<chain>``: ``{"seq", "position", "orientation"?, "stamp"?, "ttl"?, "sender"?}``
- ``joints/target``: ``{"seq", "positions": {joint: value}, "stamp"?, "ttl"?, "sender"?}``
- ``cmd``: ``{"seq"?, "command", "stamp"?, "ttl"?, "sender"?}``

:func:`parse` turns a payload into a :class:`PoseTarget`, :class:`JointTarget`
or :class:`CommandMessage`, or raises :class:`MessageRejected` carrying a
:class:`Rejection` (reason, detail, topic, seq). Nothing here touches the
network or the robot.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.spatial import rpy_to_matrix

#: Largest accepted ``seq`` (the largest integer a JSON double holds exactly).
MAX_SEQ = 2**53 - 1
#: Bounds that keep hostile payloads cheap to reject.
MAX_JOINTS = 64
MAX_NAME_LENGTH = 64
#: A coordinate larger than this [m] is a typo or an attack, not a target.
MAX_COORDINATE_M = 100.0
#: A joint target larger than this [rad or m] is rejected before the safety layer sees it.
MAX_JOINT_VALUE = 1000.0
_MIN_NORM = 1e-9


class RejectReason(enum.StrEnum):
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


class CommandName(enum.StrEnum):
    """Commands accepted on the ``cmd`` topic."""

    ENABLE = "enable"
    DISABLE = "disable"
    ESTOP = "estop"
    RESET = "reset"
    HOME = "home"
    REBOOT = "reboot"


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
    """Raised by :func:`parse` and the freshness filter; carries the :class:`Rejection`."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason.value}: {rejection.detail} ({rejection.topic})")
        self.rejection = rejection


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


class _Invalid(Exception):
    """Internal: a field is wrong; turned into a Rejection by :func:`parse`."""

    def __init__(self, reason: RejectReason, detail: str, seq: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.seq = seq


def parse(topic: str, payload: bytes, vocabulary: Vocabulary) -> Message:
    """Parse one input message.

    Args:
        topic: full MQTT topic, under ``vocabulary.prefix``.
        payload: raw message bytes.
        vocabulary: the robot's prefix, chains and joints, and the size limit.

    Returns:
        The validated message; freshness (``seq``, ``stamp``/``ttl``) is checked
        separately by :class:`~hilbot.driver.teleop.freshness.FreshnessFilter`.

    Raises:
        MessageRejected: the message is malformed or names something unknown.
    """
    seq: int | None = None
    try:
        if len(payload) > vocabulary.max_payload_bytes:
            raise _Invalid(
                RejectReason.OVERSIZED,
                f"{len(payload)} bytes, the limit is {vocabulary.max_payload_bytes}",
            )
        kind, chain = _route(topic, vocabulary)
        data = _decode(payload)
        seq = _peek_seq(data)
        return _build(kind, chain, data, vocabulary)
    except _Invalid as exc:
        seq = seq if seq is not None else exc.seq
        raise MessageRejected(Rejection(exc.reason, exc.detail, topic, seq)) from None


def _route(topic: str, vocabulary: Vocabulary) -> tuple[str, str]:
    head = vocabulary.prefix + "/"
    if not topic.startswith(head):
        raise _Invalid(RejectReason.UNKNOWN_TOPIC, f"not under the prefix {vocabulary.prefix!r}")
    rest = topic[len(head) :]
    if rest in ("cmd", "joints/target"):
        return rest, ""
    if rest.startswith("target/") and rest.count("/") == 1:
        chain = rest[len("target/") :]
        if chain not in vocabulary.chains:
            known = ", ".join(sorted(vocabulary.chains)) or "none"
            raise _Invalid(RejectReason.UNKNOWN_CHAIN, f"unknown chain {chain!r}; known: {known}")
        return "target", chain
    raise _Invalid(
        RejectReason.UNKNOWN_TOPIC,
        f"unknown topic {rest!r}; inputs are target/<chain>, joints/target and cmd",
    )


def _reject_constant(name: str) -> float:
    raise _Invalid(RejectReason.NON_FINITE, f"{name} is not a JSON number (no NaN or Infinity)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Invalid(RejectReason.INVALID, f"duplicate field {key!r}")
        result[key] = value
    return result


#: One decoder for all messages (``json.loads`` with hooks builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys)


def _decode(payload: bytes) -> dict[str, Any]:
    try:
        data = _DECODER.decode(payload.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise _Invalid(RejectReason.NOT_JSON, f"not JSON: {exc}") from None
    except _Invalid as exc:
        if exc.reason is RejectReason.NON_FINITE:
            exc.seq = _seq_despite_non_finite(payload)
        raise
    if not isinstance(data, dict):
        raise _Invalid(RejectReason.INVALID, f"expected a JSON object, got {_kind(data)}")
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


_HEADER_FIELDS = frozenset({"seq", "stamp", "ttl", "sender"})
_FIELDS = {
    "target": frozenset({"position", "orientation"}),
    "joints/target": frozenset({"positions"}),
    "cmd": frozenset({"command"}),
}


def _build(kind: str, chain: str, data: dict[str, Any], vocabulary: Vocabulary) -> Message:
    allowed = _FIELDS[kind] | _HEADER_FIELDS
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _Invalid(
            RejectReason.INVALID,
            f"unknown field {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}",
        )
    header = _header(data, seq_required=kind != "cmd")
    if kind == "target":
        position = _vector(_require(data, "position"), "position")
        return PoseTarget(header, chain, position, _orientation(data.get("orientation")))
    if kind == "joints/target":
        return JointTarget(header, _joint_positions(_require(data, "positions"), vocabulary))
    return CommandMessage(header, _command(_require(data, "command")))


def _require(data: Mapping[str, Any], key: str) -> Any:
    if key not in data:
        raise _Invalid(RejectReason.INVALID, f"missing field {key!r}")
    return data[key]


def _header(data: Mapping[str, Any], *, seq_required: bool) -> Header:
    seq: int | None = None
    if "seq" in data or seq_required:
        raw = _require(data, "seq")
        if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= MAX_SEQ:
            raise _Invalid(
                RejectReason.INVALID, f"seq must be an integer in [0, 2**53-1], got {raw!r}"
            )
        seq = raw
    stamp = _optional_number(data, "stamp", low=0.0)
    ttl = _optional_number(data, "ttl", low=0.0)
    if ttl is not None and ttl <= 0.0:
        raise _Invalid(RejectReason.INVALID, f"ttl must be > 0 s, got {ttl}")
    if ttl is not None and stamp is None:
        # Without the send time the receiver cannot tell how long the message travelled.
        raise _Invalid(RejectReason.INVALID, "ttl needs stamp (the send time, Unix seconds)")
    sender = data.get("sender", "")
    if not isinstance(sender, str) or len(sender) > MAX_NAME_LENGTH:
        raise _Invalid(
            RejectReason.INVALID, f"sender must be a string of at most {MAX_NAME_LENGTH} characters"
        )
    return Header(seq, stamp, ttl, sender)


def _optional_number(data: Mapping[str, Any], key: str, *, low: float) -> float | None:
    if key not in data or data[key] is None:
        return None
    value = _number(data[key], key)
    if value < low:
        raise _Invalid(RejectReason.INVALID, f"{key} must be >= {low}, got {value}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Invalid(RejectReason.INVALID, f"{where} must be a number, got {_kind(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise _Invalid(RejectReason.NON_FINITE, f"{where} is {number}")
    return number


def _vector(value: Any, where: str, keys: tuple[str, ...] = ("x", "y", "z")) -> NDArray[np.float64]:
    """A fixed-size vector given as ``{"x": .., ...}`` or as a list in the same order."""
    if isinstance(value, dict):
        if set(value) != set(keys):
            raise _Invalid(
                RejectReason.INVALID,
                f"{where} needs exactly the fields {', '.join(keys)}, "
                f"got {', '.join(value) or 'none'}",
            )
        items = [value[k] for k in keys]
        names = [f"{where}.{k}" for k in keys]
    elif isinstance(value, list):
        if len(value) != len(keys):
            raise _Invalid(
                RejectReason.INVALID, f"{where} needs {len(keys)} numbers, got {len(value)}"
            )
        items = value
        names = [f"{where}[{i}]" for i in range(len(keys))]
    else:
        raise _Invalid(
            RejectReason.INVALID, f"{where} must be an object or a list, got {_kind(value)}"
        )
    vector = np.array([_number(v, n) for v, n in zip(items, names, strict=True)])
    if where == "position" and np.max(np.abs(vector)) > MAX_COORDINATE_M:
        raise _Invalid(
            RejectReason.INVALID, f"position is beyond {MAX_COORDINATE_M} m: {vector.tolist()}"
        )
    return vector


def _orientation(value: Any) -> Orientation:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Invalid(
            RejectReason.INVALID,
            "orientation must be null, {w,x,y,z}, {axis: [x,y,z]} or {roll,pitch,yaw}, "
            f"got {_kind(value)}",
        )
    if "axis" in value:
        if len(value) != 1:
            raise _Invalid(RejectReason.INVALID, "orientation.axis takes no other fields")
        return _unit(_vector(value["axis"], "orientation.axis"), "orientation.axis")
    if "w" in value:
        quaternion = _vector(value, "orientation", ("w", "x", "y", "z"))
        return _unit(quaternion, "orientation")
    if "roll" in value:
        roll, pitch, yaw = _vector(value, "orientation", ("roll", "pitch", "yaw"))
        # URDF convention: fixed axes, Rz(yaw) @ Ry(pitch) @ Rx(roll).
        return rpy_to_matrix((roll, pitch, yaw))
    raise _Invalid(
        RejectReason.INVALID,
        "orientation must be {w,x,y,z}, {axis: [x,y,z]} or {roll,pitch,yaw}, "
        f"got the fields {', '.join(value) or 'none'}",
    )


def _unit(vector: NDArray[np.float64], where: str) -> NDArray[np.float64]:
    norm = float(np.linalg.norm(vector))
    if norm < _MIN_NORM:
        raise _Invalid(RejectReason.INVALID, f"{where} has zero length")
    result: NDArray[np.float64] = vector / norm
    return result


def _joint_positions(value: Any, vocabulary: Vocabulary) -> dict[str, float]:
    if not isinstance(value, dict):
        raise _Invalid(
            RejectReason.INVALID,
            f"positions must be an object {{joint: value}}, got {_kind(value)}",
        )
    if not value:
        raise _Invalid(RejectReason.INVALID, "positions is empty")
    if len(value) > MAX_JOINTS:
        raise _Invalid(
            RejectReason.INVALID, f"positions has {len(value)} joints, at most {MAX_JOINTS}"
        )
    result: dict[str, float] = {}
    for name, raw in value.items():
        if name not in vocabulary.joints:
            known = ", ".join(sorted(vocabulary.joints)) or "none"
            raise _Invalid(
                RejectReason.UNKNOWN_JOINT,
                f"unknown joint {name[:MAX_NAME_LENGTH]!r}; known: {known}",
            )
        number = _number(raw, f"positions.{name}")
        if abs(number) > MAX_JOINT_VALUE:
            raise _Invalid(
                RejectReason.INVALID, f"positions.{name} = {number} is beyond ±{MAX_JOINT_VALUE}"
            )
        result[name] = number
    return result


def _command(value: Any) -> CommandName:
    if not isinstance(value, str):
        raise _Invalid(RejectReason.INVALID, f"command must be a string, got {_kind(value)}")
    try:
        return CommandName(value)
    except ValueError:
        known = ", ".join(c.value for c in CommandName)
        raise _Invalid(
            RejectReason.UNKNOWN_COMMAND,
            f"unknown command {value[:MAX_NAME_LENGTH]!r}; known: {known}",
        ) from None


def _kind(value: Any) -> str:
    """JSON name of a value's type, for error messages."""
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
            return "an object"
    return type(value).__name__
