"""URDFs with a <mimic> the model cannot honour load with a MimicIgnored warning, or are refused.

pytest runs with ``filterwarnings = error``: each load that warns is inside ``pytest.warns``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from hilbot.kinematics import (
    KinematicsWarning,
    MimicIgnored,
    Robot,
    UrdfError,
    load_urdf,
)

ASSETS = Path(__file__).resolve().parents[1] / "assets"
FIXED = ASSETS / "mimic_on_fixed.urdf"
UNKNOWN = ASSETS / "mimic_unknown_leader.urdf"


def _load_warned(path: Path) -> tuple[Robot, list[MimicIgnored]]:
    with pytest.warns(MimicIgnored) as record:
        robot = load_urdf(path)
    found = [w.message for w in record if isinstance(w.message, MimicIgnored)]
    return robot, found


def test_a_mimic_on_a_fixed_joint_is_ignored_with_a_warning() -> None:
    robot, found = _load_warned(FIXED)
    assert sorted(w.joint for w in found) == ["finger_a_joint", "finger_b_joint"]
    assert {w.leader for w in found} == {"gripper_joint"}
    assert all("fixed" in w.reason for w in found)
    assert "strict_mimic=True" in str(found[0])
    # The fixed joints stay fixed; nothing else changes.
    assert robot.joints["finger_a_joint"].mimic is None
    assert robot.movable_joints == ("shoulder", "elbow", "gripper_joint")
    chain = robot.path_between("base", "finger_b")
    assert chain.dof == 3
    tip = chain.fk(np.zeros(3))[:3, 3]
    np.testing.assert_allclose(tip, [0.6, -0.01, 0.1], atol=1e-12)


def test_a_mimic_of_an_unknown_joint_is_ignored_with_a_warning() -> None:
    robot, found = _load_warned(UNKNOWN)
    assert [(w.joint, w.leader) for w in found] == [("finger_joint", "hand_joint")]
    assert "unknown joint 'hand_joint'" in found[0].reason
    # The follower becomes an independent joint with its own limits.
    assert robot.movable_joints == ("shoulder", "elbow", "finger_joint")
    assert robot.leader("finger_joint") is None
    assert robot.path_between("base", "finger").dof == 3


def test_a_mimic_of_a_fixed_joint_is_ignored_with_a_warning() -> None:
    text = UNKNOWN.read_text().replace('mimic joint="hand_joint"', 'mimic joint="fixed_joint"')
    text = text.replace(
        "</robot>",
        '<link name="nub"/><joint name="fixed_joint" type="fixed">'
        '<parent link="base"/><child link="nub"/></joint></robot>',
    )
    with pytest.warns(MimicIgnored, match="'fixed_joint' is fixed"):
        robot = load_urdf(text)
    assert "finger_joint" in robot.movable_joints


@pytest.mark.parametrize(
    ("path", "joint", "problem"),
    [(FIXED, "finger_a_joint", "is fixed"), (UNKNOWN, "finger_joint", "unknown joint")],
    ids=["fixed follower", "unknown leader"],
)
def test_strict_mimic_refuses(path: Path, joint: str, problem: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is warned on the way to the error
        with pytest.raises(UrdfError) as info:
            load_urdf(path, strict_mimic=True)
    assert (info.value.element, info.value.name) == ("mimic", joint)
    assert problem in info.value.problem


def test_a_usable_mimic_loads_silently_and_strictly() -> None:
    text = UNKNOWN.read_text().replace('mimic joint="hand_joint"', 'mimic joint="elbow"')
    for strict in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            robot = load_urdf(text, strict_mimic=strict)
        assert robot.leader("finger_joint") is not None
        assert robot.movable_joints == ("shoulder", "elbow")


def test_the_warning_is_a_kinematics_user_warning() -> None:
    assert issubclass(MimicIgnored, KinematicsWarning)
    assert issubclass(KinematicsWarning, UserWarning)


def test_a_chain_of_mimics_through_an_unknown_joint_stops_there() -> None:
    text = UNKNOWN.read_text().replace(
        "</robot>",
        '<link name="tip"/><joint name="tip_joint" type="revolute">'
        '<parent link="finger"/><child link="tip"/><axis xyz="0 0 1"/>'
        '<limit lower="-1" upper="1" velocity="1" effort="1"/>'
        '<mimic joint="finger_joint" multiplier="3"/></joint></robot>',
    )
    with pytest.warns(MimicIgnored) as record:
        robot = load_urdf(text)
    assert [w.message.joint for w in record] == ["finger_joint"]
    leader = robot.leader("tip_joint")
    assert leader is not None and (leader.joint, leader.multiplier) == ("finger_joint", 3.0)
