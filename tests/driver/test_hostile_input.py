"""Validate at the door: the Python API and trajectory files refuse what MQTT refuses.

``Runtime.set_target`` / ``set_joint_targets`` raise ``InvalidTarget`` with a machine-
readable ``reason`` equal to the teleop ``RejectReason`` of the same problem, before
anything reaches the loop; trajectory files are checked at load, naming the waypoint
(or CSV row) and field.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from hilbot.driver.cli import main
from hilbot.driver.runtime import targets
from hilbot.driver.runtime.errors import InvalidTarget, TargetProblem, TrajectoryError, UnknownJoint
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command
from hilbot.driver.runtime.targets import (
    normalize_joint_targets,
    normalize_pose_target,
    robust_norm,
)
from hilbot.driver.runtime.trajectory import from_mapping, load_trajectory
from hilbot.driver.teleop import messages
from hilbot.driver.teleop.messages import RejectReason
from hilbot.kinematics.ik import OrientationKind, Target

INVALID, NON_FINITE = TargetProblem.INVALID, TargetProblem.NON_FINITE
JOINTS = ("joint1", "joint2")


def test_reasons_and_bounds_are_the_mqtt_ones():
    for problem in TargetProblem:
        assert RejectReason(problem.value).value == problem.value
    assert targets.MAX_COORDINATE_M == messages.MAX_COORDINATE_M
    assert targets.MAX_JOINT_VALUE == messages.MAX_JOINT_VALUE


def test_invalid_target_keeps_its_constructor():
    err = InvalidTarget("arm", "position of shape (2,)")
    assert err.chain == "arm" and err.detail == "position of shape (2,)"
    assert err.reason is INVALID and err.reason == "invalid"
    assert str(err) == "invalid target for 'arm': position of shape (2,)"


ROTATION_HUGE = np.eye(3) * 1e200
TRANSFORM_HUGE = np.eye(4)
TRANSFORM_HUGE[:3, :3] = 1e155
TRANSFORM_FAR = np.eye(4)
TRANSFORM_FAR[0, 3] = 1e155

DEEP: list = [1.0]
for _ in range(40):
    DEEP = [DEEP]

BAD_POSES = {
    "1e155": ((1e155, 0, 0), INVALID),
    "-1e308": ((0, -1e308, 0), INVALID),
    "just-beyond": ((100.001, 0, 0), INVALID),
    "nan": ((float("nan"), 0, 0), NON_FINITE),
    "inf": ((0, float("inf"), 0), NON_FINITE),
    "int-overflow": ((10**400, 0, 0), NON_FINITE),
    "bool": ((True, 0, 0), INVALID),
    "string": (("0.1", "0", "0"), INVALID),
    "ragged": (((0.1, 0.2), (0.3,)), INVALID),
    "deep": (DEEP, INVALID),
    "huge-axis": (((0.1, 0, 0.1), (1e155, 1e155, 0)), INVALID),
    "subnormal-axis": (((0.1, 0, 0.1), (5e-324, 0, 0)), INVALID),
    "zero-axis": (((0.1, 0, 0.1), (0, 0, 0)), INVALID),
    "huge-quat": (((0.1, 0, 0.1), (1e200, 0, 0, 0)), INVALID),
    "1e308-quat": (((0.1, 0, 0.1), (1e308, 1e308, 1e308, 1e308)), INVALID),
    "tiny-quat": (((0.1, 0, 0.1), (1e-300, 0, 0, 0)), INVALID),
    "huge-rotation": (((0.1, 0, 0.1), ROTATION_HUGE), INVALID),
    "huge-4x4-rotation": (TRANSFORM_HUGE, INVALID),
    "far-4x4": (TRANSFORM_FAR, INVALID),
    "far-position-with-quat": (((1e155, 0, 0), (1, 0, 0, 0)), INVALID),
}


@pytest.mark.filterwarnings("error")  # no overflow warning on the way either
@pytest.mark.parametrize(("target", "reason"), BAD_POSES.values(), ids=BAD_POSES.keys())
def test_hostile_pose_targets_are_refused_with_the_mqtt_reason(target, reason):
    with pytest.raises(InvalidTarget) as err:
        normalize_pose_target("arm", target)
    assert err.value.reason is reason
    assert err.value.chain == "arm" and err.value.detail


GOOD_POSES = {
    "position": (0.2, 0.0, 0.1),
    "edge": (100.0, -100.0, 0.0),
    "subnormal-position": (5e-324, 0.0, 1e-310),
    "axis-scaled": ((0.2, 0, 0.1), (0, 0, -1e5)),
    "quat-scaled": ((0.2, 0, 0.1), (1.0005, 0, 0, 0)),
    "numpy-float32": np.array([0.2, 0.0, 0.1], dtype=np.float32),
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("target", GOOD_POSES.values(), ids=GOOD_POSES.keys())
def test_sane_pose_targets_pass_and_directions_come_out_unit(target):
    out = normalize_pose_target("arm", target)
    assert isinstance(out, Target)  # parsed once, into the IK package's frozen target
    if out.kind is not OrientationKind.NONE:
        direction = out.axis if out.kind is OrientationKind.AXIS else out.rotation[:, 0]
        assert np.linalg.norm(direction) == pytest.approx(1.0, abs=1e-12)
    assert all(type(v) is float for v in out.point)
    assert np.all(np.abs(out.position) <= 100.0)


BAD_JOINTS = {
    "1e155": ({"joint1": 1e155}, INVALID),
    "beyond": ({"joint1": 1000.5}, INVALID),
    "nan": ({"joint1": float("nan")}, NON_FINITE),
    "-inf": ({"joint2": float("-inf")}, NON_FINITE),
    "int-overflow": ({"joint1": 10**400}, NON_FINITE),
    "bool": ({"joint1": True}, INVALID),
    "string": ({"joint1": "0.1"}, INVALID),
    "none": ({"joint1": None}, INVALID),
    "empty": ({}, INVALID),
    "not-a-mapping": ([("joint1", 0.1)], INVALID),
}


@pytest.mark.parametrize(("positions", "reason"), BAD_JOINTS.values(), ids=BAD_JOINTS.keys())
def test_hostile_joint_targets_are_refused_with_the_mqtt_reason(positions, reason):
    with pytest.raises(InvalidTarget) as err:
        normalize_joint_targets(positions, JOINTS)
    assert err.value.reason is reason and err.value.chain == "joints"


def test_joint_targets_of_unknown_or_non_string_joints():
    with pytest.raises(UnknownJoint):
        normalize_joint_targets({"joint9": 0.0}, JOINTS)
    with pytest.raises(UnknownJoint):
        normalize_joint_targets({3: 0.0}, JOINTS)  # type: ignore[dict-item]
    assert normalize_joint_targets({"joint1": 5e-324, "joint2": -1000.0}, JOINTS) == {
        "joint1": 5e-324,
        "joint2": -1000.0,
    }


@pytest.mark.filterwarnings("error")
def test_robust_norm_neither_overflows_nor_underflows():
    assert robust_norm(np.array([1e308, 1e308])) == pytest.approx(1.4142135623730951e308)
    assert robust_norm(np.array([3e-320, 4e-320])) == pytest.approx(5e-320, rel=1e-3)
    assert robust_norm(np.zeros(3)) == 0.0


async def test_the_runtime_refuses_at_the_door_and_keeps_running(make_config, sim_factory, clock):
    config = make_config("openmanipulator_x")
    async with Runtime(config, sim_factory(config), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        before = rt.state().command
        for target, reason in BAD_POSES.values():
            with pytest.raises(InvalidTarget) as err:
                rt.set_target("arm", target)
            assert err.value.reason is reason
        for positions, reason in BAD_JOINTS.values():
            with pytest.raises(InvalidTarget) as err:
                rt.set_joint_targets(positions)
            assert err.value.reason is reason
        await rt.wait_cycles(20)
        state = rt.state()
        assert state.mode is Mode.ARMED and not state.faults
        assert state.command == before  # nothing moved


# -- trajectory files ------------------------------------------------------------------------
def _pose_trajectory(second):
    return {
        "kind": "pose",
        "waypoints": [
            {"t": 0.0, "position": [0.2, 0.0, 0.1]},
            {"t": 1.0, **second},
        ],
    }


BAD_TRAJECTORIES = {
    "1e200-position": (
        _pose_trajectory({"position": [1e200, 0.0, 0.1]}),
        "waypoints[1].position[0]",
    ),
    "huge-quaternion": (
        {
            "kind": "pose",
            "waypoints": [
                {"t": 0.0, "position": [0.2, 0, 0.1], "orientation": [1, 0, 0, 0]},
                {"t": 1.0, "position": [0.2, 0, 0.1], "orientation": [1e200, 1e200, 0, 0]},
            ],
        },
        "waypoints[1].orientation[0]",
    ),
    "subnormal-quaternion": (
        {
            "kind": "pose",
            "waypoints": [{"t": 0.0, "position": [0.2, 0, 0.1], "orientation": [5e-324, 0, 0, 0]}],
        },
        "waypoint 0 orientation",
    ),
    "1e155-joint": (
        {
            "waypoints": [
                {"t": 0.0, "joints": {"joint1": 0.0}},
                {"t": 1.0, "joints": {"joint1": 1e155}},
            ]
        },
        "waypoints[1].joints.joint1",
    ),
    "int-overflow-joint": (
        {"waypoints": [{"t": 0.0, "joints": {"joint1": 10**400}}]},
        "waypoints[0].joints.joint1",
    ),
    "huge-time": (
        {"waypoints": [{"t": 10**400, "joints": {"joint1": 0.0}}]},
        "waypoints[0].t",
    ),
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("data", "where"), BAD_TRAJECTORIES.values(), ids=BAD_TRAJECTORIES.keys())
def test_hostile_trajectories_are_refused_at_load_naming_the_waypoint(data, where):
    with pytest.raises(TrajectoryError) as err:
        from_mapping(data)
    assert err.value.where == where


@pytest.mark.parametrize(
    ("rows", "where"),
    [
        ("t,joint1\n0,0\n1,1e200\n", "row 3, column joint1"),
        ("t,x,y,z\n0,0.2,0,0.1\n1,0.2,1e155,0.1\n", "row 3, column y"),
        ("t,x,y,z,qw,qx,qy,qz\n0,0.2,0,0.1,1e200,0,0,0\n", "row 2, column qw"),
        ("t,joint1\n0,0\n1,inf\n", "row 3, column joint1"),
    ],
)
def test_hostile_csv_trajectories_name_row_and_column(tmp_path, rows, where):
    path = tmp_path / "t.csv"
    path.write_text(rows)
    with pytest.raises(TrajectoryError) as err:
        load_trajectory(path)
    assert err.value.where == where and err.value.source == path


def test_run_refuses_a_1e200_trajectory_in_one_line(tmp_path, capsys):
    path = tmp_path / "far.yaml"
    path.write_text(yaml.safe_dump(_pose_trajectory({"position": [1e200, 0.0, 0.1]})))
    assert main(["run", "--no-mqtt", "--enable", "--trajectory", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "waypoints[1].position[0]" in err and "Traceback" not in err
