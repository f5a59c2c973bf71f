"""The shipped URDFs have the names, structure and limits the rest of hilbot relies on."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import hilbot.kinematics as kin
from hilbot.kinematics import JointType, load_urdf

ROBOTS_DIR = Path(__file__).resolve().parents[2] / "configs" / "robots"


def load(name: str) -> kin.Robot:
    return load_urdf(ROBOTS_DIR / f"{name}.urdf")


@pytest.mark.parametrize(
    ("name", "source", "target", "joints"),
    [
        (
            "openmanipulator_x",
            "world",
            "end_effector_link",
            ["joint1", "joint2", "joint3", "joint4"],
        ),
        (
            "openmanipulator_x",
            "link1",
            "gripper_link",
            ["joint1", "joint2", "joint3", "joint4", "gripper"],
        ),
        (
            "widowx_250s",
            "base_link",
            "ee_gripper_link",
            ["waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate"],
        ),
        (
            "koch_v1_1",
            "base_link",
            "tool",
            ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"],
        ),
        ("bimanual", "torso", "left_tool", [f"left_joint{i}" for i in range(1, 7)]),
        ("bimanual", "torso", "right_tool", [f"right_joint{i}" for i in range(1, 7)]),
        (
            "ur5",
            "base_link",
            "tool0",
            [
                "shoulder_pan_joint",
                "shoulder_lift_joint",
                "elbow_joint",
                "wrist_1_joint",
                "wrist_2_joint",
                "wrist_3_joint",
            ],
        ),
        ("panda", "panda_link0", "panda_hand_tcp", [f"panda_joint{i}" for i in range(1, 8)]),
        ("hexapod", "base_link", "leg4_foot", ["leg4_coxa", "leg4_femur", "leg4_tibia"]),
        (
            "hexapod",
            "world",
            "leg1_foot",
            ["base_floating", "leg1_coxa", "leg1_femur", "leg1_tibia"],
        ),
    ],
)
def test_named_chains(name, source, target, joints):
    chain = load(name).path_between(source, target)
    assert [j.name for j in chain.joints] == joints


def test_gripper_joints_and_mimics():
    omx = load("openmanipulator_x")
    assert omx.leader("gripper_sub") == kin.Mimic("gripper", -1.0, 0.0)
    assert omx.joints["gripper"].type is JointType.PRISMATIC
    wx = load("widowx_250s")
    assert wx.joints["gripper"].type is JointType.CONTINUOUS
    assert wx.leader("right_finger") == kin.Mimic("left_finger", -1.0, 0.0)
    assert load("koch_v1_1").joints["gripper"].type is JointType.REVOLUTE
    panda = load("panda")
    assert panda.leader("panda_finger_joint2").joint == "panda_finger_joint1"


def test_hexapod_and_bimanual_structure():
    hexapod = load("hexapod")
    assert hexapod.root_link == "world"
    assert hexapod.joints["base_floating"].type is JointType.FLOATING
    assert hexapod.path_between("world", "leg6_foot").dof == 9
    feet = [f"leg{i}_foot" for i in range(1, 7)]
    poses = hexapod.fk({})
    # The feet at zero configuration lie on a circle around the body, 60 degrees apart.
    radii = [np.hypot(*poses[f][:2, 3]) for f in feet]
    np.testing.assert_allclose(radii, radii[0], atol=1e-12)
    bimanual = load("bimanual")
    assert "torso" in bimanual.links and bimanual.root_link in ("world", "base_link")
    left = bimanual.fk({})["left_tool"][:3, 3]
    right = bimanual.fk({})["right_tool"][:3, 3]
    np.testing.assert_allclose(left * [1, -1, 1], right, atol=1e-12)  # mirror images


@pytest.mark.parametrize("name", sorted(p.stem for p in ROBOTS_DIR.glob("*.urdf")))
def test_limits_are_realistic(name):
    robot = load(name)
    text = (ROBOTS_DIR / f"{name}.urdf").read_text()
    assert "<!--" in text.split("<robot")[0]  # the source of the numbers is stated
    assert "<mesh" not in text
    for joint in robot.joints.values():
        if joint.type in (JointType.REVOLUTE, JointType.PRISMATIC):
            lo, hi = joint.bounds()
            span = 2 * math.pi + 1e-6 if joint.type is JointType.REVOLUTE else 1.0
            assert lo < hi and hi - lo <= 2 * span, joint.name
            assert 0 < joint.limit.velocity < 20 and 0 < joint.limit.effort <= 200, joint.name


def test_robot_tree_helpers():
    robot = load("widowx_250s")
    assert robot.parent_link("shoulder_link") == "base_link"
    assert robot.parent_link("base_link") is None
    assert robot.ancestors("upper_arm_link") == ["upper_arm_link", "shoulder_link", "base_link"]
    assert [j.name for j in robot.path_joints("shoulder_link", "upper_forearm_link")] == [
        "shoulder",
        "elbow",
    ]
    assert robot.path_between("base_link", "ee_gripper_link").path[-1].name == "ee_gripper"
    assert robot.leader("waist") is None
    assert "widowx_250s" in repr(robot)
    with pytest.raises(kin.UnknownLink) as info:
        robot.parent_link("nope")
    assert info.value.role == "link"


def test_exports():
    assert sorted(kin.__all__) == sorted(set(kin.__all__))
    for name in kin.__all__:
        assert hasattr(kin, name)
    assert {t.name for t in JointType} == {
        "REVOLUTE",
        "CONTINUOUS",
        "PRISMATIC",
        "FIXED",
        "FLOATING",
        "PLANAR",
    }
    assert kin.JointLimit._fields == ("lower", "upper", "velocity", "effort")
    assert kin.Mimic._fields == ("joint", "multiplier", "offset")
