"""Parsing and validating teleop payloads (pure, no broker)."""

import json

import jsonschema
import numpy as np
import pytest

from hilbot.driver.teleop.bridge import FreshnessFilter
from hilbot.driver.teleop.messages import (
    CommandMessage,
    CommandName,
    Header,
    JointTarget,
    MessageRejected,
    PoseTarget,
    RejectReason,
    Vocabulary,
    parse,
)
from hilbot.driver.teleop.schema import SCHEMAS, load_schema
from hilbot.kinematics.spatial import rpy_to_matrix

PREFIX = "hilbot/omx"
VOCAB = Vocabulary(PREFIX, frozenset({"arm"}), frozenset({"joint1", "joint2"}), 4096)
TARGET = f"{PREFIX}/target/arm"
JOINTS = f"{PREFIX}/joints/target"
CMD = f"{PREFIX}/cmd"
SCHEMA_OF = {TARGET: "pose_target", JOINTS: "joint_target", CMD: "command"}


def payload(data):
    return json.dumps(data).encode()


GOOD = [
    (TARGET, {"seq": 1, "position": {"x": 0.2, "y": 0.0, "z": 0.1}}),
    (TARGET, {"seq": 2, "position": [0.2, 0.0, 0.1], "orientation": None}),
    (
        TARGET,
        {"seq": 3, "position": [0.2, 0, 0.1], "orientation": {"w": 1, "x": 0, "y": 0, "z": 0}},
    ),
    (TARGET, {"seq": 4, "position": [0.2, 0, 0.1], "orientation": {"axis": [0, 0, -1]}}),
    (
        TARGET,
        {"seq": 5, "position": [0.2, 0, 0.1], "orientation": {"axis": {"x": 1, "y": 0, "z": 0}}},
    ),
    (
        TARGET,
        {
            "seq": 6,
            "position": [0.2, 0, 0.1],
            "orientation": {"roll": 0.1, "pitch": 0.2, "yaw": 0.3},
        },
    ),
    (TARGET, {"seq": 7, "position": [0.2, 0, 0.1], "stamp": 1.7e9, "ttl": 0.2, "sender": "pad"}),
    (JOINTS, {"seq": 1, "positions": {"joint1": 0.5, "joint2": -0.25}}),
    (CMD, {"command": "estop"}),
    *[(CMD, {"seq": i, "command": c.value}) for i, c in enumerate(CommandName)],
]


@pytest.mark.parametrize(
    ("topic", "data"), GOOD, ids=[f"{t.split('/')[-1]}-{i}" for i, (t, _) in enumerate(GOOD)]
)
def test_good_payloads_parse_and_match_the_schema(topic, data):
    message = parse(topic, payload(data), VOCAB)
    assert message.header.seq == data.get("seq")
    jsonschema.validate(data, load_schema(SCHEMA_OF[topic]))


def test_pose_target_forms():
    m = parse(TARGET, payload({"seq": 1, "position": {"x": 1, "y": 2, "z": 3}}), VOCAB)
    assert isinstance(m, PoseTarget) and m.chain == "arm"
    np.testing.assert_array_equal(m.runtime_target(), [1.0, 2.0, 3.0])
    m = parse(
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "orientation": {"w": 2, "x": 0, "y": 0, "z": 0}}),
        VOCAB,
    )
    _position, quaternion = m.runtime_target()
    np.testing.assert_allclose(quaternion, [1, 0, 0, 0])  # normalised
    m = parse(
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "orientation": {"axis": [0, 0, -3]}}),
        VOCAB,
    )
    np.testing.assert_allclose(m.orientation, [0, 0, -1])
    m = parse(
        TARGET,
        payload(
            {
                "seq": 1,
                "position": [0, 0, 0],
                "orientation": {"roll": 0.1, "pitch": -0.4, "yaw": 2.0},
            }
        ),
        VOCAB,
    )
    np.testing.assert_allclose(m.orientation, rpy_to_matrix((0.1, -0.4, 2.0)))


def test_joint_and_command_messages():
    m = parse(JOINTS, payload({"seq": 9, "positions": {"joint2": 1}}), VOCAB)
    assert isinstance(m, JointTarget) and m.positions == {"joint2": 1.0}
    m = parse(CMD, payload({"seq": 3, "command": "home"}), VOCAB)
    assert isinstance(m, CommandMessage) and m.command is CommandName.HOME


BAD = [
    ("oversized", TARGET, b" " * 5000 + b"{}", RejectReason.OVERSIZED),
    ("not-json", TARGET, b"{seq: 1", RejectReason.NOT_JSON),
    ("not-utf8", TARGET, b"\xff\xfe{}", RejectReason.NOT_JSON),
    ("deep-nesting", TARGET, b"[" * 3000 + b"]" * 3000, RejectReason.OVERSIZED),
    ("deep-nesting-small", TARGET, b"[" * 1500 + b"]" * 1500, RejectReason.NOT_JSON),
    ("array-payload", TARGET, b"[1, 2, 3]", RejectReason.INVALID),
    ("nan-literal", TARGET, b'{"seq": 1, "position": [NaN, 0, 0]}', RejectReason.NON_FINITE),
    (
        "infinity-literal",
        TARGET,
        b'{"seq": 1, "position": [0, Infinity, 0]}',
        RejectReason.NON_FINITE,
    ),
    ("overflow-to-inf", TARGET, b'{"seq": 1, "position": [0, 0, 1e400]}', RejectReason.NON_FINITE),
    ("missing-seq", TARGET, payload({"position": [0, 0, 0]}), RejectReason.INVALID),
    ("negative-seq", TARGET, payload({"seq": -1, "position": [0, 0, 0]}), RejectReason.INVALID),
    ("float-seq", TARGET, payload({"seq": 1.5, "position": [0, 0, 0]}), RejectReason.INVALID),
    ("bool-seq", TARGET, payload({"seq": True, "position": [0, 0, 0]}), RejectReason.INVALID),
    ("missing-position", TARGET, payload({"seq": 1}), RejectReason.INVALID),
    ("position-2-values", TARGET, payload({"seq": 1, "position": [0, 0]}), RejectReason.INVALID),
    (
        "position-4-values",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0, 0]}),
        RejectReason.INVALID,
    ),
    ("position-string", TARGET, payload({"seq": 1, "position": "0,0,0"}), RejectReason.INVALID),
    ("position-bool", TARGET, payload({"seq": 1, "position": [True, 0, 0]}), RejectReason.INVALID),
    (
        "position-missing-z",
        TARGET,
        payload({"seq": 1, "position": {"x": 0, "y": 0}}),
        RejectReason.INVALID,
    ),
    ("position-far", TARGET, payload({"seq": 1, "position": [1000, 0, 0]}), RejectReason.INVALID),
    (
        "unknown-field",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "speed": 3}),
        RejectReason.INVALID,
    ),
    (
        "duplicate-field",
        TARGET,
        b'{"seq": 1, "position": [0, 0, 0], "seq": 2}',
        RejectReason.INVALID,
    ),
    (
        "zero-quaternion",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "orientation": {"w": 0, "x": 0, "y": 0, "z": 0}}),
        RejectReason.INVALID,
    ),
    (
        "zero-axis",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "orientation": {"axis": [0, 0, 0]}}),
        RejectReason.INVALID,
    ),
    (
        "orientation-list",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "orientation": [1, 0, 0, 0]}),
        RejectReason.INVALID,
    ),
    (
        "orientation-unknown",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "orientation": {"angle": 1}}),
        RejectReason.INVALID,
    ),
    (
        "ttl-without-stamp",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "ttl": 1}),
        RejectReason.INVALID,
    ),
    (
        "zero-ttl",
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "stamp": 1, "ttl": 0}),
        RejectReason.INVALID,
    ),
    (
        "unknown-chain",
        f"{PREFIX}/target/leg",
        payload({"seq": 1, "position": [0, 0, 0]}),
        RejectReason.UNKNOWN_CHAIN,
    ),
    ("unknown-topic", f"{PREFIX}/whatever", payload({"seq": 1}), RejectReason.UNKNOWN_TOPIC),
    (
        "other-prefix",
        "hilbot/other/cmd",
        payload({"command": "enable"}),
        RejectReason.UNKNOWN_TOPIC,
    ),
    (
        "unknown-joint",
        JOINTS,
        payload({"seq": 1, "positions": {"elbow": 0}}),
        RejectReason.UNKNOWN_JOINT,
    ),
    ("empty-joints", JOINTS, payload({"seq": 1, "positions": {}}), RejectReason.INVALID),
    (
        "joint-string",
        JOINTS,
        payload({"seq": 1, "positions": {"joint1": "0.1"}}),
        RejectReason.INVALID,
    ),
    ("joint-huge", JOINTS, payload({"seq": 1, "positions": {"joint1": 1e6}}), RejectReason.INVALID),
    ("joint-nan", JOINTS, b'{"seq": 1, "positions": {"joint1": NaN}}', RejectReason.NON_FINITE),
    (
        "unknown-command",
        CMD,
        payload({"seq": 1, "command": "selfdestruct"}),
        RejectReason.UNKNOWN_COMMAND,
    ),
    ("command-number", CMD, payload({"seq": 1, "command": 3}), RejectReason.INVALID),
    ("command-missing", CMD, payload({"seq": 1}), RejectReason.INVALID),
    ("empty-payload", CMD, b"", RejectReason.NOT_JSON),
]


@pytest.mark.parametrize(("topic", "raw", "reason"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_payloads_are_rejected_with_their_reason(topic, raw, reason):
    with pytest.raises(MessageRejected) as info:
        parse(topic, raw, VOCAB)
    rejection = info.value.rejection
    assert rejection.reason is reason
    assert rejection.topic == topic
    assert rejection.detail
    json.dumps(rejection.to_json())  # always serialisable


def test_rejection_carries_the_seq_when_it_is_valid():
    with pytest.raises(MessageRejected) as info:
        parse(TARGET, payload({"seq": 42, "position": [0, 0]}), VOCAB)
    assert info.value.rejection.seq == 42
    assert "position needs 3 numbers, got 2" in info.value.rejection.detail


def test_unknown_chain_names_the_known_ones():
    with pytest.raises(MessageRejected) as info:
        parse(f"{PREFIX}/target/leg", payload({"seq": 1, "position": [0, 0, 0]}), VOCAB)
    assert "known: arm" in info.value.rejection.detail


OVERFLOWING = [
    {"w": 1e200, "x": 0, "y": 0, "z": 0},
    {"w": 1e300, "x": 1e300, "y": 0, "z": 0},
    {"w": 1e-300, "x": 0, "y": 0, "z": -1e155},
    {"axis": [1e200, 0, 0]},
    {"axis": {"x": 0, "y": -1e300, "z": 1e300}},
    {"roll": 1e300, "pitch": 0, "yaw": 0},
]


@pytest.mark.parametrize("orientation", OVERFLOWING)
def test_an_orientation_whose_norm_overflows_is_invalid(orientation):
    # Its squared norm is inf: normalising it gave a zero vector, which the runtime refused.
    with pytest.raises(MessageRejected) as info:
        parse(TARGET, payload({"seq": 7, "position": [0, 0, 0], "orientation": orientation}), VOCAB)
    rejection = info.value.rejection
    assert rejection.reason is RejectReason.INVALID
    assert rejection.detail.startswith("orientation.")
    assert "must be <= " in rejection.detail or "must be >= " in rejection.detail
    assert rejection.seq == 7
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"seq": 7, "position": [0, 0, 0], "orientation": orientation},
            load_schema("pose_target"),
        )


def test_large_orientations_within_bounds_are_normalised_exactly():
    m = parse(
        TARGET,
        payload(
            {"seq": 1, "position": [0, 0, 0], "orientation": {"w": 1e6, "x": 1e6, "y": 0, "z": 0}}
        ),
        VOCAB,
    )
    np.testing.assert_allclose(m.orientation, [2**-0.5, 2**-0.5, 0, 0], rtol=1e-15)
    m = parse(
        TARGET,
        payload({"seq": 1, "position": [0, 0, 0], "orientation": {"axis": [0, 3e-9, 4e-9]}}),
        VOCAB,
    )
    np.testing.assert_allclose(m.orientation, [0, 0.6, 0.8], rtol=1e-15)


@pytest.mark.parametrize(
    ("topic", "data"),
    [
        (TARGET, {"seq": 1, "position": [0, 0]}),
        (TARGET, {"seq": 1, "position": [0, 0, 0], "speed": 1}),
        (TARGET, {"seq": 1, "position": [0, 0, 0], "ttl": 1}),
        (TARGET, {"seq": 1, "position": [0, 0, 0], "orientation": {"angle": 1}}),
        (JOINTS, {"seq": 1, "positions": {}}),
        (CMD, {"command": "selfdestruct"}),
    ],
)
def test_the_schema_rejects_what_the_parser_rejects(topic, data):
    with pytest.raises(MessageRejected):
        parse(topic, payload(data), VOCAB)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, load_schema(SCHEMA_OF[topic]))


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_are_valid_draft_2020_12(name):
    jsonschema.Draft202012Validator.check_schema(load_schema(name))


class Clock:
    def __init__(self, t=0.0):
        self.t = t

    def __call__(self):
        return self.t


def header(seq, stamp=None, ttl=None, sender=""):
    return Header(seq, stamp, ttl, sender)


def test_freshness_drops_old_and_repeated_seq_per_sender():
    mono = Clock()
    f = FreshnessFilter(
        default_ttl_s=0.5, max_clock_skew_s=0.1, monotonic=mono, wall_clock=Clock(100.0)
    )
    f.check("t", header(5))
    for stale in (5, 4):
        with pytest.raises(MessageRejected) as info:
            f.check("t", header(stale))
        assert info.value.rejection.reason is RejectReason.STALE_SEQ
    f.check("t", header(1, sender="other"))  # another sender is another stream
    f.check("u", header(1))  # another topic is another stream
    f.check("t", header(6))
    mono.t = 3.0  # silent for longer than seq_reset_s: a restarted sender may start over
    f.check("t", header(1))


def test_freshness_drops_expired_and_future_stamps():
    wall = Clock(1000.0)
    f = FreshnessFilter(default_ttl_s=0.5, max_clock_skew_s=0.1, wall_clock=wall)
    f.check("t", header(1, stamp=999.6))
    with pytest.raises(MessageRejected) as info:
        f.check("t", header(2, stamp=999.4))
    assert info.value.rejection.reason is RejectReason.EXPIRED
    f.check("t", header(3, stamp=998.0, ttl=5.0))  # its own ttl is longer
    with pytest.raises(MessageRejected) as info:
        f.check("t", header(4, stamp=1000.5))
    assert info.value.rejection.reason is RejectReason.FUTURE_STAMP
    f.check("t", header(5, stamp=1000.05))  # within the tolerated skew


def test_freshness_memory_is_bounded():
    f = FreshnessFilter(default_ttl_s=0.5, max_clock_skew_s=0.1, max_streams=16)
    for i in range(1000):
        f.check("t", header(1, sender=f"s{i}"))
    assert len(f) == 16
