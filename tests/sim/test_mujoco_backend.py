"""The MuJoCo backend: the servo model driving a physical body (gravity, contact)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the mujoco extra is not installed")

from hilbot.driver.runtime.backends import mujoco_backend, sim_backend
from hilbot.driver.runtime.config import load_config
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.errors import ConfigError
from hilbot.sim.mujoco_scene import SceneObject, scene_from_data

G = 9.81


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def omx():
    return load_config("openmanipulator_x")


async def _hold(backend, clock, seconds, dt=0.005):
    state = None
    for _ in range(round(seconds / dt)):
        clock.t += dt
        state = await backend.read()
    return state


async def _run_sequence(config):
    clock = Clock()
    async with mujoco_backend(config, clock=clock) as b:
        await b.set_torque(True)
        out = []
        for k in range(300):
            clock.t += 0.005
            if k % 20 == 0:
                await b.write(
                    {"joint1": 0.4 * np.sin(k / 40), "joint2": -0.5 + 0.3 * np.cos(k / 50)}
                )
            s = await b.read()
            out.append(np.concatenate([s.position, s.velocity, s.effort, s.temperature]))
        return np.array(out)


async def test_same_inputs_give_the_same_recording(omx):
    first = await _run_sequence(omx)
    second = await _run_sequence(omx)
    assert np.array_equal(first, second)
    assert np.ptp(first[:, 0]) > 0.2  # it did move


def _gravity_torque(backend, joint: str) -> float:
    """Static gravity torque on ``joint`` [N·m] from the compiled masses and the link poses."""
    import mujoco

    body = backend.body
    m, d = body.model, body.data
    jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)
    anchor, axis = d.xanchor[jid], d.xaxis[jid]
    below = {int(m.jnt_bodyid[jid])}
    for b in range(m.nbody):  # bodies are numbered parents first
        if int(m.body_parentid[b]) in below:
            below.add(b)
    torque = 0.0
    for b in below:
        force = np.array([0.0, 0.0, -G * m.body_mass[b]])
        torque += float(np.dot(axis, np.cross(d.xipos[b] - anchor, force)))
    return torque


async def test_present_current_shows_the_gravity_load(omx):
    clock = Clock()
    pose = {"joint1": 0.0, "joint2": 0.9, "joint3": -0.6, "joint4": 0.0, "gripper": 0.0}
    async with mujoco_backend(omx, clock=clock, initial_positions=pose) as b:
        await b.set_torque(True)
        state = await _hold(b, clock, 2.0)
        i = state.names.index("joint2")
        # XM430-W350: 4.1 N·m stall at 2.3 A; current is the torque holding the links up
        expected = -_gravity_torque(b, "joint2") * 2.3 / 4.1
        assert abs(expected) > 0.2  # the arm leans forward: a real load
        assert state.effort[i] == pytest.approx(expected, rel=0.1)
        assert abs(state.position[i] - 0.9) < 0.02  # and the servo holds the pose
    clock = Clock()
    async with sim_backend(omx, clock=clock, initial_positions=pose) as plain:
        await plain.set_torque(True)
        state = await _hold(plain, clock, 2.0)
        assert abs(state.effort[i]) < 0.05  # no body, no load


async def test_torque_off_the_arm_falls_under_gravity(omx):
    clock = Clock()
    pose = {"joint1": 0.0, "joint2": 0.9, "joint3": -0.6, "joint4": 0.0, "gripper": 0.0}
    async with mujoco_backend(omx, clock=clock, initial_positions=pose) as b:
        await b.set_torque(True)
        await _hold(b, clock, 0.5)
        await b.set_torque(False)
        state = await _hold(b, clock, 1.0)
        assert state.position[state.names.index("joint2")] > 1.0  # fell forwards (from 0.9)


BLOCK = {
    "objects": [
        # a post beside the arm, in the way of joint1 turning towards +y
        {"name": "post", "shape": "box", "size": [0.02, 0.02, 0.2], "pos": [0.1, 0.12, 0.2]}
    ]
}


async def test_a_joint_blocked_by_a_scene_object_saturates_and_overloads(omx):
    clock = Clock()
    scene = scene_from_data(BLOCK)
    async with mujoco_backend(omx, clock=clock, scene=scene) as b:
        await b.set_torque(True)
        await _hold(b, clock, 0.2)
        await b.write({"joint1": 1.2})
        state = await _hold(b, clock, 0.5)
        i = state.names.index("joint1")
        assert 0.2 < state.position[i] < 1.0  # stopped by the post
        assert b.body.contacts("post") > 0
        assert abs(state.effort[i]) > 0.85 * 2.3  # near stall current
        state = await _hold(b, clock, 2.0)  # overload_time 1.5 s at >= 90 % of stall
        assert state.hardware_errors[i] & HardwareErrorFlags.OVERLOAD
    clock = Clock()
    async with mujoco_backend(omx, clock=clock) as free:
        await free.set_torque(True)
        await free.write({"joint1": 1.2})
        state = await _hold(free, clock, 1.0)
        assert state.position[i] == pytest.approx(1.2, abs=0.01)
        assert not state.hardware_errors[i]


async def test_a_free_box_is_pushed_by_the_arm(omx):
    clock = Clock()
    scene = scene_from_data(
        {
            "objects": [
                # a shelf beside the arm at its home height (the gripper is at z 0.24)
                {
                    "name": "shelf",
                    "shape": "box",
                    "size": [0.15, 0.1, 0.01],
                    "pos": [0.05, 0.15, 0.2],
                },
                {
                    "name": "cube",
                    "shape": "box",
                    "size": [0.02, 0.02, 0.02],
                    "pos": [0.06, 0.09, 0.23],
                    "mass": 0.05,
                    "friction": 0.3,
                },
            ]
        }
    )
    async with mujoco_backend(omx, clock=clock, scene=scene) as b:
        await b.set_torque(True)
        await _hold(b, clock, 0.3)
        start = b.body.body_position("cube")
        assert start[2] == pytest.approx(0.23, abs=0.005)  # resting on the shelf
        await b.write({"joint1": 1.0})
        await _hold(b, clock, 1.0)
        moved = b.body.body_position("cube") - start
        assert np.linalg.norm(moved[:2]) > 0.01


async def test_bimanual_robot_is_one_body():
    config = load_config("bimanual")
    clock = Clock()
    async with mujoco_backend(config, clock=clock) as b:
        assert len(b.joint_names) == 12
        await b.set_torque(True)
        state = await _hold(b, clock, 0.5)
        assert np.all(np.isfinite(state.position))
        home = np.array([config.home[j] for j in state.names])
        assert np.max(np.abs(state.position - home)) < 0.05


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"name": "a", "shape": "cone", "size": [1], "pos": [0, 0, 0]}, "shape"),
        ({"name": "a", "shape": "box", "size": [1, 1], "pos": [0, 0, 0]}, "size"),
        ({"name": "a", "shape": "box", "size": [0.1, 0.1, 0.1], "pos": [0, 0]}, "pos"),
        ({"name": "a", "shape": "sphere", "size": [0.1], "pos": [0, 0, 0], "mass": -1}, "mass"),
        ({"name": "a", "shape": "sphere", "size": [0.1], "pos": [0, 0, 0], "colour": 1}, "colour"),
    ],
    ids=["shape", "size", "pos", "mass", "unknown-field"],
)
def test_bad_scene_objects_are_refused_naming_the_field(entry, field):
    with pytest.raises(ConfigError) as err:
        scene_from_data({"objects": [entry]})
    assert err.value.field == field


def test_scene_object_names_must_be_unique():
    box = {"name": "a", "shape": "sphere", "size": [0.1], "pos": [0, 0, 0]}
    with pytest.raises(ConfigError, match="twice"):
        scene_from_data([box, box])
    assert isinstance(scene_from_data([box])[0], SceneObject)


async def test_the_shipped_scene_file_compiles_with_the_robot(omx):
    from pathlib import Path

    from hilbot.sim.mujoco_scene import load_scene

    path = Path(__file__).resolve().parents[2] / "configs/scenes/openmanipulator_table.yaml"
    scene = load_scene(path)
    assert [o.name for o in scene] == ["shelf", "cube"]
    async with mujoco_backend(omx, scene=scene) as b:
        assert b.body.body_position("cube")[2] == pytest.approx(0.23)


def test_a_missing_scene_file_is_one_clear_error(tmp_path):
    from hilbot.sim.mujoco_scene import load_scene

    with pytest.raises(ConfigError, match="cannot read the scene file"):
        load_scene(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("objects: [1, 2")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_scene(tmp_path / "bad.yaml")


def test_run_on_mujoco_with_a_scene_and_the_scene_only_there(tmp_path, capsys):
    from hilbot.driver.cli import main

    scene = tmp_path / "scene.yaml"
    scene.write_text(
        "objects: [{name: table, shape: box, size: [0.2, 0.2, 0.01], pos: [0.3, 0, 0]}]"
    )
    common = ["run", "openmanipulator_x", "--no-mqtt", "--no-status", "--duration", "0.5"]
    assert main([*common, "--backend", "mujoco", "--scene", str(scene), "--enable"]) == 0
    assert "shutdown: torque off on 5 servos" in capsys.readouterr().out
    assert main([*common, "--scene", str(scene)]) == 2
    assert "--scene is for --backend mujoco, not sim" in capsys.readouterr().err
    scene.write_text("objects: [{name: t, shape: cone, size: [1], pos: [0, 0, 0]}]")
    assert main([*common, "--backend", "mujoco", "--scene", str(scene)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown shape 'cone'" in err[0]


async def test_a_torque_limited_servo_pushes_at_its_limit_without_overloading(omx):
    """Current-based position control against a post: the cap holds, nothing overloads."""
    clock = Clock()
    async with mujoco_backend(omx, clock=clock, scene=scene_from_data(BLOCK)) as b:
        i = b.joint_names.index("joint1")
        b.model.set_torque_limit(i, 1.0)  # [N·m]: 0.56 A on the XM430-W350
        await b.set_torque(True)
        await b.write({"joint1": 1.2})
        state = await _hold(b, clock, 3.0)
        assert 0.2 < state.position[i] < 1.0  # still stopped by the post
        assert abs(state.effort[i]) == pytest.approx(1.0 * 2.3 / 4.1, rel=0.02)
        assert not state.hardware_errors[i]


def test_a_floating_base_is_refused_in_one_line(capsys):
    from hilbot.driver.cli import main

    code = main(["run", "hexapod", "--backend", "mujoco", "--no-mqtt", "--duration", "0.5"])
    assert code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'base_floating'" in err[0] and "floating" in err[0]


@pytest.mark.parametrize(
    "name",
    [
        "openmanipulator_x",
        "widowx_250s",  # shadow servos; fingers no servo drives, one mimicking the other
        "koch_v1_1_follower",
        "koch_v1_1_leader",
        "so101_follower",
        "so101_leader",
        "bimanual",
    ],
)
async def test_every_shipped_arm_holds_its_home_pose_on_the_body(name):
    config = load_config(name)
    clock = Clock()
    async with mujoco_backend(config, clock=clock) as b:
        await b.set_torque(True)
        state = await _hold(b, clock, 2.0)
        home = np.array([config.home.get(j, 0.0) for j in state.names])
        assert np.max(np.abs(state.position - home)) < 0.03
        assert not any(state.hardware_errors)
