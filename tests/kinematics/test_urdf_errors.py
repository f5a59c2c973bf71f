"""Bad URDFs raise UrdfError naming the element and the problem; lookup errors carry data."""

from __future__ import annotations

import pytest

from hilbot.kinematics import (
    KinematicsError,
    NotAnAncestor,
    UnknownJoint,
    UnknownLink,
    UrdfError,
    load_urdf,
)

LIMIT = '<limit lower="-1" upper="1" velocity="1" effort="1"/>'


def robot(*joints: str, links: str = "a b c") -> str:
    body = "".join(f'<link name="{n}"/>' for n in links.split())
    return f'<robot name="r">{body}{"".join(joints)}</robot>'


def joint(
    name: str, parent: str | None, child: str | None, kind: str = "revolute", extra: str = LIMIT
) -> str:
    p = f'<parent link="{parent}"/>' if parent else ""
    c = f'<child link="{child}"/>' if child else ""
    return f'<joint name="{name}" type="{kind}">{p}{c}{extra}</joint>'


GOOD = [joint("j1", "a", "b"), joint("j2", "b", "c")]

CASES = {
    "missing parent element": (
        robot(joint("j1", None, "b"), joint("j2", "b", "c")),
        "joint",
        "j1",
        "missing <parent>",
    ),
    "missing child element": (
        robot(joint("j1", "a", None), joint("j2", "b", "c")),
        "joint",
        "j1",
        "missing <child>",
    ),
    "parent without link attribute": (
        robot('<joint name="j1" type="fixed"><parent/><child link="b"/></joint>', GOOD[1]),
        "joint",
        "j1",
        "<parent> has no 'link' attribute",
    ),
    "child without link attribute": (
        robot('<joint name="j1" type="fixed"><parent link="a"/><child/></joint>', GOOD[1]),
        "joint",
        "j1",
        "<child> has no 'link' attribute",
    ),
    "undefined parent link": (
        robot(joint("j1", "nope", "b"), joint("j2", "b", "c")),
        "joint",
        "j1",
        "parent link 'nope' is not defined",
    ),
    "undefined child link": (
        robot(joint("j1", "a", "b"), joint("j2", "b", "zz")),
        "joint",
        "j2",
        "child link 'zz' is not defined",
    ),
    "cycle": (
        robot(joint("j1", "a", "b"), joint("j2", "b", "c"), joint("j3", "c", "b"), links="a b c"),
        "link",
        "b",
        "child of two joints",
    ),
    "cycle without root": (
        robot(joint("j1", "a", "b"), joint("j2", "b", "a"), links="a b"),
        "robot",
        None,
        "cycle",
    ),
    "detached cycle": (
        robot(joint("j1", "a", "b"), joint("j2", "c", "d"), joint("j3", "d", "c"), links="a b c d"),
        "robot",
        None,
        "cycle through links ['c', 'd']",
    ),
    "two roots": (robot(joint("j1", "a", "b")), "robot", None, "more than one root"),
    "unknown type": (
        robot(joint("j1", "a", "b", kind="hinge"), joint("j2", "b", "c")),
        "joint",
        "j1",
        "unknown joint type 'hinge'",
    ),
    "missing type": (
        robot('<joint name="j1"><parent link="a"/><child link="b"/></joint>', GOOD[1]),
        "joint",
        "j1",
        "missing required attribute 'type'",
    ),
    "non-numeric origin": (
        robot(joint("j1", "a", "b", extra=LIMIT + '<origin xyz="0 x 0"/>'), GOOD[1]),
        "origin",
        "j1",
        "not numeric",
    ),
    "short origin": (
        robot(joint("j1", "a", "b", extra=LIMIT + '<origin rpy="0 0"/>'), GOOD[1]),
        "origin",
        "j1",
        "needs 3 numbers",
    ),
    "non-numeric limit": (
        robot(
            joint("j1", "a", "b", extra='<limit lower="a" upper="1" velocity="1" effort="1"/>'),
            GOOD[1],
        ),
        "limit",
        "j1",
        "lower='a' is not numeric",
    ),
    "missing velocity": (
        robot(joint("j1", "a", "b", extra='<limit lower="0" upper="1" effort="1"/>'), GOOD[1]),
        "limit",
        "j1",
        "missing required attribute 'velocity'",
    ),
    "missing effort": (
        robot(joint("j1", "a", "b", extra='<limit lower="0" upper="1" velocity="1"/>'), GOOD[1]),
        "limit",
        "j1",
        "missing required attribute 'effort'",
    ),
    "non-numeric mimic multiplier": (
        robot(GOOD[0], joint("j2", "b", "c", extra=LIMIT + '<mimic joint="j1" multiplier="x"/>')),
        "mimic",
        "j2",
        "multiplier='x' is not numeric",
    ),
    "zero planar axis": (
        robot(joint("j1", "a", "b", kind="planar", extra='<axis xyz="0 0 0"/>'), GOOD[1]),
        "axis",
        "j1",
        "is zero",
    ),
    "missing limit": (
        robot(joint("j1", "a", "b", kind="prismatic", extra=""), GOOD[1]),
        "joint",
        "j1",
        "needs a <limit>",
    ),
    "zero axis": (
        robot(joint("j1", "a", "b", extra=LIMIT + '<axis xyz="0 0 0"/>'), GOOD[1]),
        "axis",
        "j1",
        "is zero",
    ),
    "missing axis xyz": (
        robot(joint("j1", "a", "b", extra=LIMIT + "<axis/>"), GOOD[1]),
        "axis",
        "j1",
        "missing required attribute 'xyz'",
    ),
    "lower above upper": (
        robot(
            joint("j1", "a", "b", extra='<limit lower="2" upper="1" velocity="1" effort="1"/>'),
            GOOD[1],
        ),
        "limit",
        "j1",
        "lower=2.0 is greater than upper=1.0",
    ),
    "missing joint name": (
        robot('<joint type="fixed"><parent link="a"/><child link="b"/></joint>', GOOD[1]),
        "joint",
        None,
        "missing required attribute 'name'",
    ),
    "duplicate link": (robot(*GOOD, links="a b c b"), "link", "b", "duplicate link name"),
    "duplicate joint": (
        robot(joint("j1", "a", "b"), joint("j1", "b", "c")),
        "joint",
        "j1",
        "duplicate",
    ),
    "mimic cycle": (
        robot(
            joint("j1", "a", "b", extra=LIMIT + '<mimic joint="j2"/>'),
            joint("j2", "b", "c", extra=LIMIT + '<mimic joint="j1"/>'),
        ),
        "mimic",
        "j1",
        "cycle",
    ),
    "mimic of a planar joint": (
        robot(
            joint("j1", "a", "b", kind="planar", extra=""),
            joint("j2", "b", "c", extra=LIMIT + '<mimic joint="j1"/>'),
        ),
        "mimic",
        "j2",
        "is planar",
    ),
    "not xml": ("<robot", "robot", None, "not well-formed"),
    "not a robot": ("<model/>", "model", None, "must be <robot>"),
    "no links": ("<robot/>", "robot", None, "has no <link>"),
}


@pytest.mark.parametrize(("text", "element", "name", "problem"), CASES.values(), ids=CASES)
def test_bad_urdf(text: str, element: str, name: str | None, problem: str) -> None:
    with pytest.raises(UrdfError) as info:
        load_urdf(text)
    err = info.value
    assert (err.element, err.name) == (element, name)
    assert problem in err.problem
    # The message names the element (its tag, and its name when it has one) and the problem.
    message = str(err)
    assert message.startswith(f"URDF <{element}")
    if name is not None:
        assert f"name={name!r}" in message
    assert problem in message
    assert isinstance(err, KinematicsError) and isinstance(err, ValueError)


def test_good_robot_and_defaults() -> None:
    r = load_urdf(robot(joint("j1", "a", "b", kind="continuous", extra=""), GOOD[1]))
    j1 = r.joints["j1"]
    assert j1.axis.tolist() == [1.0, 0.0, 0.0] and j1.limit is None
    assert j1.origin.tolist() == [[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]]
    j2 = r.joints["j2"]
    assert (j2.limit.lower, j2.limit.upper, j2.limit.velocity, j2.limit.effort) == (-1, 1, 1, 1)
    assert r.root_link == "a" and r.links["b"].parent_joint == "j1"
    assert r.links["a"].child_joints == ("j1",)


def test_file_path_is_read(tmp_path) -> None:
    path = tmp_path / "r.urdf"
    path.write_text(robot(*GOOD))
    assert load_urdf(path).name == "r"
    assert load_urdf(str(path)).movable_joints == ("j1", "j2")


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_input_is_a_urdf_error(text: str) -> None:
    with pytest.raises(UrdfError, match="empty input"):
        load_urdf(text)


BRANCHED = robot(
    joint("j1", "a", "b"), joint("j2", "b", "c"), joint("j3", "b", "d"), links="a b c d"
)


@pytest.mark.parametrize("role", ["source", "target"])
def test_unknown_link_carries_name_and_role(role: str) -> None:
    r = load_urdf(BRANCHED)
    args = ("nope", "c") if role == "source" else ("a", "nope")
    with pytest.raises(UnknownLink) as info:
        r.path_between(*args)
    assert info.value.link == "nope" and info.value.role == role
    assert info.value.known == ("a", "b", "c", "d")
    assert "nope" in str(info.value) and "a, b, c, d" in str(info.value)


@pytest.mark.parametrize(
    ("source", "target", "common"), [("c", "d", "b"), ("c", "a", "a"), ("d", "b", "b")]
)
def test_not_an_ancestor_carries_the_common_ancestor(source: str, target: str, common: str):
    r = load_urdf(BRANCHED)
    with pytest.raises(NotAnAncestor) as info:
        r.path_between(source, target)
    err = info.value
    assert (err.source, err.target, err.common_ancestor) == (source, target, common)
    assert f"source_link={common!r}" in str(err)


def test_error_classes_are_distinct_under_one_root() -> None:
    classes = [UrdfError, UnknownLink, UnknownJoint, NotAnAncestor]
    for cls in classes:
        assert issubclass(cls, KinematicsError)
        assert not any(issubclass(cls, other) for other in classes if other is not cls)
    r = load_urdf(BRANCHED)
    with pytest.raises(KinematicsError) as info:  # one except clause catches all of them
        r.path_between("c", "d")
    assert type(info.value) is NotAnAncestor
    with pytest.raises(KinematicsError) as info:
        r.path_between("a", "nope")
    assert type(info.value) is UnknownLink


def test_unknown_joint_carries_name() -> None:
    r = load_urdf(BRANCHED)
    with pytest.raises(UnknownJoint) as info:
        r.limits("elbow")
    assert info.value.joint == "elbow" and info.value.known == ("j1", "j2", "j3")
    assert isinstance(info.value, KeyError)
    assert "elbow" in str(info.value)
    with pytest.raises(UnknownJoint) as info:
        r.fk({"j9": 0.0})
    assert info.value.joint == "j9"
