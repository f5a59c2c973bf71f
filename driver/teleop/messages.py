"""Teleop messages: parse and validate MQTT payloads, sans I/O.

Each input topic carries one JSON object, defined by the pydantic models in
:mod:`~hilbot.driver.teleop.payloads` (the shipped JSON Schema files are generated
from them; see ``docs/teleop.md``):

- ``target/<chain>``: ``{"seq", "position", "orientation"?, "stamp"?, "ttl"?, "sender"?}``
- ``joints/target``: ``{"seq", "positions": {joint: value}, "stamp"?, "ttl"?, "sender"?}``
- ``cmd``: ``{"seq"?, "command", "stamp"?, "ttl"?, "sender"?}``

:func:`parse` turns a payload into a :class:`PoseTarget`, :class:`JointTarget`
or :class:`CommandMessage`, or raises :class:`MessageRejected` carrying a
:class:`Rejection` (reason, detail, topic, seq). Nothing here touches the
network or the robot.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from hilbot.driver.targets import MAX_COORDINATE_M, MAX_JOINT_VALUE
from hilbot.driver.teleop.payload_errors import invalid_from, json_kind
from hilbot.driver.teleop.payloads import (
    MAX_JOINTS,
    MAX_NAME_LENGTH,
    MAX_SEQ,
    CommandName,
    CommandPayload,
    Direction,
    JointTargetPayload,
    PoseTargetPayload,
    Position,
    Quaternion,
    RollPitchYaw,
    ToolAxis,
    Wire,
)
from hilbot.driver.teleop.rejection import Invalid, MessageRejected, Rejection, RejectReason
from hilbot.kinematics.spatial import rpy_to_matrix

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

#: A quaternion or axis shorter than this has no direction.
_MIN_NORM = 1e-9


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
        separately by :class:`~hilbot.driver.teleop.freshness.FreshnessFilter`.

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
