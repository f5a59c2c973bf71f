"""The live view: what the cycle listener keeps, what the scene shows, and its errors."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("viser", reason="the view extra is not installed")

from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, CycleRecord
from hilbot.driver.view import LiveView, ViewError
from hilbot.driver.view.geometry import segment_pose, target_point
from hilbot.sim.sim_backend import SimBackend

ROOT = Path(__file__).resolve().parents[2]


async def _wait_frames(view: LiveView, n: int, timeout: float = 30.0) -> None:
    start, deadline = view.frames, time.monotonic() + timeout
    while view.frames < start + n:
        assert time.monotonic() < deadline, "the view drew no frames"
        await asyncio.sleep(0.02)


async def test_the_view_shows_measured_and_commanded_poses(make_config):
    config = make_config("openmanipulator_x")
    backend = SimBackend(config.servo_specs("main"), initial_positions=dict(config.home))
    async with Runtime(config, backend) as rt:
        view = LiveView(rt, port=0, rate_hz=50)
        try:
            rt.add_cycle_listener(view.listener)
            await rt.command(Command.ENABLE)
            rt.set_joint_targets({"joint1": 0.6})
            await rt.wait_cycles(5)
            await _wait_frames(view, 2)
            scene = view.scene
            k = next(i for i, s in enumerate(scene._segments) if s.link == "link5")
            await rt.wait_cycles(200)  # arrived
            await _wait_frames(view, 2)
            snapshot = rt.state()
            assert snapshot.joints is not None
            names = snapshot.joints.names
            measured = dict(zip(names, snapshot.joints.position.tolist(), strict=True))
            for positions, handles in (
                (measured, scene._measured),
                (snapshot.command, scene._ghost),
            ):
                pose = rt.robot.fk({j: positions[j] for j in names if j != "gripper"})
                _, center, _ = segment_pose(pose["link5"], scene._segments[k])
                assert np.allclose(handles[k].position, center, atol=2e-3)
            # joint1 turned 0.6 rad: the wrist is off the x-z plane
            assert scene._measured[k].position[1] > 0.01
            assert "armed" in scene._status.content
        finally:
            view.close()


def test_the_listener_keeps_a_copy_of_the_cycle(make_config):
    config = make_config("openmanipulator_x")

    class FakeRuntime:  # only what LiveView reads from a runtime
        def __init__(self) -> None:
            from hilbot.driver.runtime.validation import load_robot

            self.config = config
            self.robot = load_robot(config.urdf)
            self.joint_names = config.joint_names

    view = LiveView(FakeRuntime(), port=0)
    try:
        from hilbot.hal.backend import JointState

        n = len(config.joint_names)
        state = JointState(
            names=tuple(config.joint_names),
            position=np.zeros(n),
            velocity=np.zeros(n),
            effort=np.zeros(n),
            temperature=np.zeros(n),
            hardware_errors=(),
            timestamp=0.0,
        )
        record = CycleRecord(mode=Mode.ARMED, state=state, command=np.full(n, 0.1))
        record.targets["arm"] = np.array([0.2, 0.0, 0.1])
        view.listener(record)
        record.command[:] = 5.0  # the loop reuses its record
        state.position[:] = 5.0
        frame = view._slot
        assert frame is not None
        assert frame.commanded == dict.fromkeys(config.joint_names, 0.1)
        assert set(frame.measured.values()) == {0.0}
        assert np.allclose(frame.targets["arm"], [0.2, 0.0, 0.1])
    finally:
        view.close()


@pytest.mark.parametrize(
    ("value", "point"),
    [
        (np.array([1.0, 2.0, 3.0]), [1, 2, 3]),
        ((np.array([1.0, 2.0, 3.0]), np.array([1.0, 0, 0, 0])), [1, 2, 3]),
        (np.eye(4) + np.pad(np.ones((3, 1)), ((0, 1), (3, 0))), [1, 1, 1]),
        ("nonsense", None),
    ],
    ids=["position", "with-orientation", "transform", "not-a-pose"],
)
def test_target_points(value, point):
    got = target_point(value)
    assert (got is None) if point is None else np.allclose(got, point)


def test_a_taken_port_is_one_line_and_nothing_runs():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ViewError, match=f"{port} is in use"):
            from hilbot.driver.view.server import open_server

            open_server("127.0.0.1", port)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hilbot",
                "run",
                "openmanipulator_x",
                "--no-mqtt",
                "--no-status",
                "--duration",
                "5",
                "--view",
                "--view-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "in use" in lines[0], proc.stderr


def test_scene_objects_are_drawn_where_declared(make_config):
    from hilbot.driver.runtime.validation import load_robot
    from hilbot.sim.mujoco_scene import scene_from_data

    config = make_config("openmanipulator_x")

    class FakeRuntime:  # only what LiveView reads from a runtime
        def __init__(self) -> None:
            self.config, self.robot = config, load_robot(config.urdf)
            self.joint_names = config.joint_names

    scene = scene_from_data(
        [
            {"name": "table", "shape": "box", "size": [0.2, 0.1, 0.01], "pos": [0.3, 0, 0.1]},
            {"name": "ball", "shape": "sphere", "size": [0.02], "pos": [0.2, 0, 0.13], "mass": 0.1},
        ]
    )
    view = LiveView(FakeRuntime(), port=0, scene=scene)
    try:
        table, ball = view.scene.objects["table"], view.scene.objects["ball"]
        assert np.allclose(table.position, [0.3, 0, 0.1])
        assert np.allclose(table.dimensions, [0.4, 0.2, 0.02])
        assert np.allclose(ball.position, [0.2, 0, 0.13])
    finally:
        view.close()


async def test_a_pushed_box_moves_in_the_view(make_config):
    pytest.importorskip("mujoco", reason="the mujoco extra is not installed")
    from hilbot.driver.runtime.backends import mujoco_backend
    from hilbot.sim.mujoco_scene import load_scene

    config = make_config("openmanipulator_x")
    scene = load_scene(ROOT / "configs/scenes/openmanipulator_table.yaml")
    backend = mujoco_backend(config, scene=scene)
    async with Runtime(config, backend) as rt:
        view = LiveView(rt, port=0, rate_hz=50, scene=scene, poses=backend.scene_poses)
        try:
            rt.add_cycle_listener(view.listener)
            start = np.array(view.scene.objects["cube"].position)
            await rt.command(Command.ENABLE)
            rt.set_joint_targets({"joint1": 1.0})
            deadline = time.monotonic() + 30
            while np.linalg.norm(view.scene.objects["cube"].position - start) < 0.01:
                assert time.monotonic() < deadline, "the cube never moved in the view"
                await asyncio.sleep(0.05)
            assert np.allclose(
                view.scene.objects["cube"].position, backend.body.body_position("cube"), atol=0.02
            )
        finally:
            view.close()
