"""The shipped JSON Schemas are the ones the payload models generate, and agree with parse."""

import json
import subprocess
import sys

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbot.driver.teleop.messages import MessageRejected, RejectReason, Vocabulary, parse
from hilbot.driver.teleop.schema import SCHEMAS, generate_schema, load_schema, schema_text

PREFIX = "hilbot/omx"
VOCAB = Vocabulary(PREFIX, frozenset({"arm"}), frozenset({"joint1", "joint2"}), 4096)


@pytest.mark.parametrize("name", SCHEMAS)
def test_the_shipped_schema_is_the_generated_one(name):
    assert load_schema(name) == generate_schema(name), (
        f"schema/{name}.schema.json is stale: run python -m hilbot.driver.teleop.schema --write"
    )


@pytest.mark.parametrize("name", SCHEMAS)
def test_generated_schemas_are_valid_draft_2020_12(name):
    schema = generate_schema(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == name
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema_text(name).endswith("}\n")


def test_the_check_command_passes_on_the_shipped_files():
    done = subprocess.run(
        [sys.executable, "-m", "hilbot.driver.teleop.schema", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


numbers = st.one_of(
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, -1, 0.5, 99.9, 100, 100.5, 1e6, 1e200, -1e308, 5e-324]),
)
junk = st.one_of(st.none(), st.booleans(), st.text(max_size=3), st.lists(numbers, max_size=4))
vectors = st.one_of(
    st.lists(st.one_of(numbers, junk), min_size=2, max_size=4),
    st.fixed_dictionaries({"x": numbers, "y": numbers, "z": numbers}),
    junk,
)
orientations = st.one_of(
    st.none(),
    st.fixed_dictionaries({"w": numbers, "x": numbers, "y": numbers, "z": numbers}),
    st.fixed_dictionaries({"axis": vectors}),
    st.fixed_dictionaries({"roll": numbers, "pitch": numbers, "yaw": numbers}),
    st.dictionaries(st.sampled_from(["w", "axis", "roll", "angle"]), numbers, max_size=2),
    junk,
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "seq": st.one_of(st.integers(-2, 2**54), numbers, junk),
        "stamp": st.one_of(numbers, st.none()),
        "ttl": st.one_of(numbers, st.none()),
        "sender": st.text(max_size=70),
        "speed": numbers,
    },
)
poses = st.tuples(
    headers,
    st.fixed_dictionaries({}, optional={"position": vectors}),
    st.fixed_dictionaries({}, optional={"orientation": orientations}),
)
joints = st.tuples(
    headers,
    st.fixed_dictionaries(
        {},
        optional={
            "positions": st.one_of(
                st.dictionaries(st.sampled_from(["joint1", "joint2"]), st.one_of(numbers, junk)),
                junk,
            )
        },
    ),
)
commands = st.tuples(
    headers,
    st.fixed_dictionaries(
        {}, optional={"command": st.one_of(st.sampled_from(["estop", "home", "fly"]), junk)}
    ),
)


def agree(topic, schema, parts):
    data = {k: v for part in parts for k, v in part.items()}
    raw = json.dumps(data).encode()
    try:
        parse(topic, raw, VOCAB)
        accepted = True
    except MessageRejected as exc:
        accepted = False
        reason = exc.rejection.reason
        # What no JSON Schema can say: a direction of zero length, and that 1.0 is no
        # integer (the schema's "integer" takes any number without a fraction).
        if reason is RejectReason.INVALID and "zero length" in exc.rejection.detail:
            return
        if isinstance(data.get("seq"), float) and data["seq"].is_integer():
            return
        assert reason is not RejectReason.NOT_JSON
    valid = jsonschema.Draft202012Validator(load_schema(schema)).is_valid(data)
    assert accepted == valid, (data, accepted)


@settings(max_examples=600, deadline=None)
@given(poses)
def test_parse_and_the_schema_agree_on_pose_targets(parts):
    agree(f"{PREFIX}/target/arm", "pose_target", parts)


@settings(max_examples=300, deadline=None)
@given(joints)
def test_parse_and_the_schema_agree_on_joint_targets(parts):
    agree(f"{PREFIX}/joints/target", "joint_target", parts)


@settings(max_examples=300, deadline=None)
@given(commands)
def test_parse_and_the_schema_agree_on_commands(parts):
    agree(f"{PREFIX}/cmd", "command", parts)
