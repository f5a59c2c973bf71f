"""Rejection details stay short and name the problem, whatever the sender sent.

An integer too large for a float overflows to infinity (``non_finite``, as the reason
table says), huge values are shown in 6 digits instead of hundreds, and a payload that is
not an object is named in JSON's words, not Python's.
"""

from __future__ import annotations

import pytest

from hilbot.driver.teleop.bridge import FreshnessFilter
from hilbot.driver.teleop.messages import (
    MessageRejected,
    Rejection,
    RejectReason,
    Vocabulary,
    json_kind,
    number_text,
    parse,
)

PREFIX = "hilbot/omx"
VOCAB = Vocabulary(PREFIX, frozenset({"arm"}), frozenset({"joint1"}), 4096)
TARGET = f"{PREFIX}/target/arm"
JOINTS = f"{PREFIX}/joints/target"
HUGE = "1" * 310  # an integer beyond the largest float (about 1.8e308)
SHORT = 120  # [characters] a detail that fits a terminal line with its reason


def rejected(topic: str, text: str) -> Rejection:
    with pytest.raises(MessageRejected) as info:
        parse(topic, text.encode(), VOCAB)
    return info.value.rejection


@pytest.mark.parametrize(
    ("topic", "text", "field"),
    [
        (JOINTS, f'{{"seq": 10, "positions": {{"joint1": {HUGE}}}}}', "positions.joint1"),
        (TARGET, f'{{"seq": 10, "position": [{HUGE}, 0, 0]}}', "position[0]"),
        (TARGET, f'{{"seq": 10, "position": {{"x": 0, "y": {HUGE}, "z": 0}}}}', "position.y"),
        (
            TARGET,
            f'{{"seq": 10, "position": [0, 0, 0], "orientation": '
            f'{{"w": {HUGE}, "x": 0, "y": 0, "z": 0}}}}',
            "orientation.w",
        ),
        (TARGET, f'{{"seq": 10, "position": [0, 0, 0], "stamp": {HUGE}}}', "stamp"),
        (TARGET, f'{{"seq": 10, "position": [0, 0, 0], "stamp": 1, "ttl": {HUGE}}}', "ttl"),
    ],
    ids=["joint", "position list", "position object", "quaternion", "stamp", "ttl"],
)
def test_an_integer_too_large_for_a_float_is_non_finite(topic: str, text: str, field: str) -> None:
    rejection = rejected(topic, text)
    assert rejection.reason is RejectReason.NON_FINITE, rejection
    assert rejection.detail == f"{field} is 1.11111e+309, too large: it overflows to infinity"
    assert rejection.seq == 10


def test_a_float_literal_that_overflows_is_still_non_finite() -> None:
    rejection = rejected(TARGET, '{"seq": 3, "position": [0, 0, 1e400]}')
    assert (rejection.reason, rejection.detail) == (RejectReason.NON_FINITE, "position[2] is inf")


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ('{"seq": ' + "1" * 161 + ', "position": [0, 0, 0]}', "seq must be <= 9007199254740991, "
         "got 1.11111e+160"),
        ('{"seq": 9007199254740992, "position": [0, 0, 0]}', "seq must be <= 9007199254740991, "
         "got 9007199254740992"),  # a number of seq's size stays exact
        ('{"seq": 1, "position": [0, 0, ' + "1" * 40 + "]}", "position[2] must be <= 100.0, "
         "got 1.11111e+39"),
        ('{"seq": 1, "position": [0, 0, 1e300]}', "position[2] must be <= 100.0, got 1e+300"),
        ('{"seq": 1, "position": [0, 0, -123.25]}', "position[2] must be >= -100.0, "
         "got -123.25"),
        ('{"seq": 1, "position": [0, 0, 100.59978648806331]}', "position[2] must be <= 100.0, "
         "got 100.6"),  # 6 digits are enough to see it is beyond
        ('{"seq": 1, "position": [0, 0, 100.0000001]}', "position[2] must be <= 100.0, "
         "got 100.0000001"),  # ... and as many as it takes when it is just beyond
        ('{"seq": 1, "position": [0, 0, 0], "stamp": 1, "ttl": -1e-300}', "ttl must be > 0.0, "
         "got -1e-300"),
    ],
    ids=["huge seq", "seq just beyond", "huge integer", "huge float", "plain float",
         "long float", "float just beyond", "tiny float"],
)  # fmt: skip
def test_bound_errors_show_few_digits_yet_beyond_the_bound(text: str, detail: str) -> None:
    rejection = rejected(TARGET, text)
    assert (rejection.reason, rejection.detail) == (RejectReason.INVALID, detail)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('"x"', "a string"),
        ("null", "null"),
        ("1.5", "a number"),
        ("7", "a number"),
        ("true", "a boolean"),
        ("[1, 2]", "an array"),
    ],
)
def test_a_payload_that_is_not_an_object_is_named_in_json_words(text: str, kind: str) -> None:
    rejection = rejected(TARGET, text)
    assert rejection.reason is RejectReason.INVALID
    assert rejection.detail == f"expected a JSON object, got {kind}"


def test_a_field_of_the_wrong_type_uses_the_same_words() -> None:
    rejection = rejected(JOINTS, '{"seq": 1, "positions": {"joint1": "up"}}')
    assert rejection.detail == "positions.joint1 must be a number, got a string"
    assert json_kind(None) == "null" and json_kind("x") == "a string"


def _freshness_rejection(stamp: float, ttl: float | None = None) -> Rejection:
    text = f'{{"seq": 1, "position": [0, 0, 0], "stamp": {stamp!r}'
    text += f', "ttl": {ttl!r}}}' if ttl is not None else "}"
    header = parse(TARGET, text.encode(), VOCAB).header
    freshness = FreshnessFilter(
        default_ttl_s=0.5, max_clock_skew_s=0.5, wall_clock=lambda: 1_764_400_000.0
    )
    with pytest.raises(MessageRejected) as info:
        freshness.check(TARGET, header)
    return info.value.rejection


def test_a_stamp_far_in_the_future_is_told_in_six_digits() -> None:
    rejection = _freshness_rejection(1e300)
    assert rejection.reason is RejectReason.FUTURE_STAMP
    assert rejection.detail.startswith("stamp is 1e+300 s in the future (tolerance 0.5 s)")
    assert len(rejection.detail) < SHORT


def test_near_stamps_keep_their_milliseconds() -> None:
    future = _freshness_rejection(1_764_400_010.0)
    assert future.detail.startswith("stamp is 10.000 s in the future")
    old = _freshness_rejection(1_764_399_998.75, ttl=0.25)
    assert old.detail == "message is 1.250 s old, its ttl is 0.25 s"
    ancient = _freshness_rejection(0.0)
    assert ancient.detail == "message is 1.7644e+09 s old, its ttl is 0.5 s"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (int("1" * 310), "1.11111e+309"),
        (10**5000, "1e+5000"),  # beyond str()'s 4300 digits
        (-(10**20), "-1e+20"),
        (2**53, "9007199254740992"),
        (1e300, "1e+300"),
        (0.1, "0.1"),
        ("text", "text"),
    ],
    ids=["310 digits", "5001 digits", "negative", "2^53", "1e300", "0.1", "not a number"],
)
def test_number_text(value: object, text: str) -> None:
    assert number_text(value) == text
