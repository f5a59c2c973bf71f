"""Scripted trajectories: parsing, interpolation, errors, and playing them into the runtime."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.errors import TrajectoryError
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command
from hilbot.driver.runtime.trajectory import (
    TrajectoryKind,
    from_mapping,
    load_trajectory,
    play,
    slerp,
)


def test_joint_waypoints_interpolate_linearly_and_hold_at_the_end():
    traj = from_mapping(
        {
            "waypoints": [
                {"t": 0.0, "joints": {"joint1": 0.0, "joint2": 1.0}},
                {"t": 2.0, "joints": {"joint1": 1.0, "joint2": 0.0}},
            ]
        }
    )
    assert traj.kind is TrajectoryKind.JOINTS
    assert traj.sample(0.5) == pytest.approx({"joint1": 0.25, "joint2": 0.75})
    assert traj.sample(5.0) == pytest.approx({"joint1": 1.0, "joint2": 0.0})
    assert traj.sample(-1.0) == pytest.approx({"joint1": 0.0, "joint2": 1.0})


def test_looping_pose_trajectory_with_slerp():
    half = [np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)]  # 90° about z
    traj = from_mapping(
        {
            "kind": "pose",
            "chain": "arm",
            "loop": True,
            "waypoints": [
                {"t": 0.0, "position": [0, 0, 0], "orientation": [1, 0, 0, 0]},
                {"t": 1.0, "position": [1, 0, 0], "orientation": half},
            ],
        }
    )
    position, quat = traj.sample(1.5)  # loops: same as t = 0.5
    np.testing.assert_allclose(position, [0.5, 0, 0])
    np.testing.assert_allclose(quat, [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)], atol=1e-12)


def test_slerp_takes_the_short_way():
    q = slerp(np.array([1.0, 0, 0, 0]), np.array([-1.0, 0, 0, 0]), 0.5)
    np.testing.assert_allclose(np.abs(q), [1, 0, 0, 0])


def test_csv_joint_and_pose_files(tmp_path):
    joints = tmp_path / "j.csv"
    joints.write_text("t,joint1,joint2\n0,0,0\n1,1,-1\n")
    traj = load_trajectory(joints)
    assert traj.names == ("joint1", "joint2")
    assert traj.sample(0.5) == pytest.approx({"joint1": 0.5, "joint2": -0.5})
    pose = tmp_path / "p.csv"
    pose.write_text("t,x,y,z,qw,qx,qy,qz\n0,0.1,0,0.2,1,0,0,0\n1,0.2,0,0.2,1,0,0,0\n")
    traj = load_trajectory(pose)
    assert traj.kind is TrajectoryKind.POSE and traj.quaternions is not None


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("waypoints: []", "waypoints"),
        ("kind: dance\nwaypoints: [{t: 0, joints: {a: 1}}]", "kind"),
        ("waypoints: [{t: 1, joints: {a: 1}}, {t: 0.5, joints: {a: 2}}]", "waypoints"),
        ("waypoints: [{t: 0, joints: {a: .nan}}]", "waypoints[0].joints.a"),
        ("waypoints: [{t: 0, joints: {a: 1}}, {t: 1, joints: {b: 1}}]", "waypoints[1].joints"),
        ("kind: pose\nwaypoints: [{t: 0, position: [1, 2]}]", "waypoints[0].position"),
        ("speed: 3\nwaypoints: [{t: 0, joints: {a: 1}}]", "speed"),
    ],
    ids=["empty", "kind", "time-order", "nan", "joint-set", "position", "unknown-field"],
)
def test_bad_trajectory_files_name_the_problem(tmp_path, text, where):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(TrajectoryError) as err:
        load_trajectory(path)
    assert err.value.where == where
    assert err.value.source == path


def test_bad_csv_rows(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("t,joint1\n0,0\n1,abc\n")
    with pytest.raises(TrajectoryError) as err:
        load_trajectory(path)
    assert err.value.where == "row 3"


async def test_play_drives_the_runtime_and_ends(clock):
    config = load_config("openmanipulator_x")
    traj = from_mapping(
        {
            "waypoints": [
                {"t": 0.0, "joints": {"joint1": 0.0}},
                {"t": 1.0, "joints": {"joint1": 0.5}},
            ]
        }
    )
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await play(traj, rt, clock=clock)
        await rt.wait_cycles(40)
        state = rt.state()
    assert state.joints.positions()["joint1"] == pytest.approx(0.5, abs=0.01)


async def test_play_refuses_an_unknown_chain(clock):
    config = load_config("openmanipulator_x")
    traj = from_mapping(
        {"kind": "pose", "chain": "leg", "waypoints": [{"t": 0, "position": [0.2, 0, 0.1]}]}
    )
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        with pytest.raises(TrajectoryError, match="unknown chain 'leg'"):
            await play(traj, rt, clock=clock)


async def test_play_a_pose_trajectory_tracks_it_through_ik(clock):
    config = load_config("openmanipulator_x")
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        start = rt.state().poses["arm"][:3, 3].copy()
        # The end is the tool position of a nearby configuration: reachable.
        goal = dict(rt.state().command)
        goal.update(joint1=goal["joint1"] + 0.4, joint2=goal["joint2"] + 0.2)
        chain = rt.robot.path_between("link1", "end_effector_link")
        end = chain.fk(chain.q_from(goal))[:3, 3]
        traj = from_mapping(
            {
                "kind": "pose",
                "chain": "arm",
                "waypoints": [
                    {"t": 0.0, "position": start.tolist()},
                    {"t": 1.0, "position": end.tolist()},
                ],
            }
        )
        seen = []
        rt.add_cycle_listener(lambda r: "arm" in r.targets and seen.append(r.ik.get("arm")))
        await play(traj, rt, clock=clock)
        await rt.wait_cycles(40)
        state = rt.state()
    assert np.linalg.norm(state.poses["arm"][:3, 3] - end) < 2e-3
    assert len(seen) > 150  # the chain was fed (and solved) all along
    assert state.stats.ik_failures <= 3
