"""A target the runtime refuses is reported with the reason MQTT's own check would give."""

import pytest

from hilbot.driver.runtime.errors import InvalidTarget, TargetProblem, UnknownChain, UnknownJoint
from hilbot.driver.teleop.messages import RejectReason, refusal_reason


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (InvalidTarget("arm", "too far", TargetProblem.INVALID), RejectReason.INVALID),
        (InvalidTarget("arm", "nan", TargetProblem.NON_FINITE), RejectReason.NON_FINITE),
        (UnknownChain("leg", ["arm"]), RejectReason.UNKNOWN_CHAIN),
        (UnknownJoint("knee", ["joint1"]), RejectReason.UNKNOWN_JOINT),
        (RuntimeError("the runtime is not running"), RejectReason.REFUSED),
    ],
    ids=["invalid", "non_finite", "unknown_chain", "unknown_joint", "other"],
)
def test_the_refusal_carries_the_parser_reason(exc, reason):
    assert refusal_reason(exc) is reason


def test_every_target_problem_is_a_reject_reason():
    assert {p.value for p in TargetProblem} <= {r.value for r in RejectReason}
