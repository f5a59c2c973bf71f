"""Why a teleop message was dropped: the reasons, the record and the exception."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hilbot._compat import StrEnum


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
    from hilbot.driver.errors import InvalidTarget, UnknownChain, UnknownJoint

    if isinstance(exc, InvalidTarget):
        return RejectReason(exc.reason.value)
    if isinstance(exc, UnknownChain):
        return RejectReason.UNKNOWN_CHAIN
    if isinstance(exc, UnknownJoint):
        return RejectReason.UNKNOWN_JOINT
    return RejectReason.REFUSED
