"""The LeRobot plugins (``--robot.type=hilbot``, ``--teleop.type=hilbot``) in LeRobot itself.

LeRobot's own code runs in its environment (``HILBOT_LEROBOT_PYTHON``; skipped without
it), with hilbot and the two plugins installed there by ``scripts/install-lerobot-plugins``
(the fixture runs it: quick when they are installed already). The CLI tests run
LeRobot's commands unchanged (``lerobot-teleoperate``, ``lerobot-record``,
``lerobot-replay``, ``lerobot-calibrate``) against hilbot's runtime on virtual buses or
the simulator, and check what happened: goals on the virtual bus, the frames and
episodes of the dataset, the calibration files.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

LEROBOT_PYTHON = os.environ.get("HILBOT_LEROBOT_PYTHON", "")
HERE = Path(__file__).parent
CLIENT = HERE / "lerobot_plugin_client.py"
ROOT = HERE.parent.parent

pytestmark = pytest.mark.skipif(
    not LEROBOT_PYTHON, reason="HILBOT_LEROBOT_PYTHON (a python with lerobot) is not set"
)


@pytest.fixture(scope="module", autouse=True)
def plugins_installed() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "install-lerobot-plugins"), LEROBOT_PYTHON, "--editable"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _env(home: Path) -> dict[str, str]:
    """Offline, and hilbot's and LeRobot's files under ``home``."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_LEROBOT_HOME": str(home / "lerobot"),
        "HF_LEROBOT_CALIBRATION": str(home / "lerobot-calibration"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_STATE_HOME": str(home / "state"),
    }


def client(*args: str, home: Path) -> object:
    done = subprocess.run(
        [LEROBOT_PYTHON, str(CLIENT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(home),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def lerobot_command(
    name: str, *args: str, home: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """A ``lerobot-*`` command of LeRobot's environment, unchanged."""
    command = str(Path(LEROBOT_PYTHON).parent / name)
    done = subprocess.run(
        [command, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(home),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    for part in done.stderr.split("Traceback")[1:]:  # none but LeRobot's headless probe's
        assert "is_headless" in part[:600], done.stderr[-6000:]
    return done


def _hilbot(*args: str, home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(home),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_features_equal_lerobots_own_classes(tmp_path: Path) -> None:
    got = client("features", home=tmp_path)
    assert isinstance(got, dict)
    for config in ("so101_follower", "koch_v1_1_follower", "so101_leader", "koch_v1_1_leader"):
        assert got[config]["ours"] == got[config]["theirs"], config
    assert got["so101_follower"]["type"] == "HilbotRobot"
    assert got["so101_leader"]["type"] == "HilbotTeleop"


@pytest.mark.parametrize(("robot", "kind"), [("so101_follower", "so101"),
                                             ("koch_v1_1_follower", "koch")])  # fmt: skip
def test_units_round_trip_against_the_same_calibration(
    robot: str, kind: str, tmp_path: Path
) -> None:
    """Observation: the hilbot robot's value of a reading = LeRobot's value of its ticks.
    Action: the joint it targets for a value sits at the ticks LeRobot writes for it."""
    mounts = ["--mount", "2:-12"] if kind == "koch" else []  # as test_lerobot_calibration.py
    _hilbot("calibrate", robot, "--backend", "virtual", "--demo", "--yes", *mounts,
            home=tmp_path)  # fmt: skip
    folder = tmp_path / "lerobot-files"
    folder.mkdir()
    _hilbot("calibrate", robot, "--backend", "virtual", "--to-lerobot",
            str(folder / "arm.json"), home=tmp_path)  # fmt: skip
    back = tmp_path / "back.yaml"
    _hilbot("calibrate", robot, "--backend", "virtual", "--from-lerobot",
            str(folder / "arm.json"), "--out", str(back), home=tmp_path)  # fmt: skip
    got = client("units", kind, str(folder), "arm", str(back), home=tmp_path)
    assert isinstance(got, dict)
    for row in got["rows"]:
        for name, theirs in row["lerobot_values"].items():
            assert row["hilbot_values"][name] == pytest.approx(theirs, abs=0.2), name
            # LeRobot truncates to whole ticks; the joint lies within a tick of them
            assert row["hilbot_ticks"][name] == pytest.approx(row["lerobot_ticks"][name],
                                                              abs=1.5), name  # fmt: skip


# -- LeRobot's commands, unchanged ------------------------------------------------------------

FOLLOWER = ["--robot.type=hilbot", "--robot.config=so101_follower", "--robot.id=arm"]
LEADER = ["--teleop.type=hilbot", "--teleop.config=so101_leader", "--teleop.backend=virtual",
          "--teleop.hand=sweep"]  # fmt: skip


@contextmanager
def follower_bus(home: Path) -> Iterator[list[str]]:
    """A factory-fresh virtual SO-101 follower (``hilbot sim-bus``) and LeRobot's file of it.

    Yields the ``--robot.*`` options that drive it (``--robot.backend=virtual
    --robot.port=PTY``: that bus, none started): LeRobot's calibration file of the arm is in the
    ``--robot.calibration_dir`` (ranges a few ticks inside the URDF's, the Homing Offsets
    the factory's), which the hilbot robot imports on connect. (The recording's robot ran
    on the simulator, whose ranges are the URDF's: a frame at a range's end stays
    reachable.)
    """
    from hilbot.driver.calibration import lerobot as lerobot_files
    from hilbot.driver.calibration.checks import urdf_limits
    from hilbot.driver.runtime.config import load_config
    from hilbot.hal.calibration import Calibration, JointCalibration

    config = load_config("so101_follower")
    limits = urdf_limits(config)
    joints = {
        s.joint: JointCalibration(
            s.id,
            s.offset,
            s.direction,
            limits[s.joint].lower + 0.005,
            limits[s.joint].upper - 0.005,
        )
        for s in config.servo_specs()
    }
    folder = home / "lerobot-files"
    folder.mkdir(parents=True, exist_ok=True)
    data = lerobot_files.to_lerobot(Calibration(config.name, "pty", joints, "now"), config)
    lerobot_files.write_file(data, folder / "arm.json")
    command = [sys.executable, "-m", "hilbot", "sim-bus", "so101_follower", "--no-persist",
               "--return-delay", "0"]  # fmt: skip
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(home)
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert ": /dev/" in line, line
            port = line.split()[1]
            yield [*FOLLOWER, "--robot.backend=virtual", f"--robot.port={port}",
                   f"--robot.calibration_dir={folder}"]  # fmt: skip
        finally:
            process.terminate()
            process.wait(timeout=30)


def _port(options: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in options if o.startswith("--robot.port="))


def _goals(options: list[str], home: Path) -> dict[str, int]:
    got = client("goals", _port(options), home=home)
    assert isinstance(got, dict)
    return {k: int(v) for k, v in got["goal"].items()}


def test_lerobot_teleoperate_moves_the_follower_after_the_leader(tmp_path: Path) -> None:
    with follower_bus(tmp_path) as robot:
        before = _goals(robot, tmp_path)
        lerobot_command("lerobot-teleoperate", *robot, *LEADER, "--teleop_time_s=6",
                        "--fps=30", "--display_data=false", home=tmp_path)  # fmt: skip
        after = _goals(robot, tmp_path)
    moved = {k: after[k] - before[k] for k in before if abs(after[k] - before[k]) > 40}
    assert moved, (before, after)  # the hand swept the leader; the follower's goals followed
    # the LeRobot calibration file was imported as hilbot's calibration of that port
    assert list((tmp_path / "config" / "hilbot" / "calibration").glob("so101_follower-*.yaml"))


def test_lerobot_record_then_replay(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    lerobot_command(
        "lerobot-record", *FOLLOWER, "--robot.backend=sim", *LEADER,
        "--dataset.repo_id=local/hilbot_sweep", f"--dataset.root={root}",
        "--dataset.num_episodes=2", "--dataset.episode_time_s=4", "--dataset.reset_time_s=1",
        "--dataset.fps=30", "--dataset.push_to_hub=false", "--dataset.single_task=follow the sweep",
        "--dataset.video=false", "--display_data=false", "--play_sounds=false", home=tmp_path,
    )  # fmt: skip
    got = client("dataset", str(root), "local/hilbot_sweep", home=tmp_path)
    assert isinstance(got, dict)
    assert got["num_episodes"] == 2
    assert set(got["lengths"]) == {"0", "1"}
    for length in got["lengths"].values():
        assert 60 <= length <= 4 * 30 + 2  # 4 s at 30 fps, less what a busy host skips
    assert got["robot_type"] == "so_follower"  # LeRobot's own SO-101 class's name
    names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    assert got["action_names"] == got["state_names"] == [f"{n}.pos" for n in names]
    actions = got["episode0_actions"]
    spread = [max(a[j] for a in actions) - min(a[j] for a in actions) for j in range(6)]
    assert max(spread) > 5.0, spread  # the leader's sweep is in the actions

    with follower_bus(tmp_path) as robot:
        before = _goals(robot, tmp_path)
        lerobot_command(
            "lerobot-replay", *robot, "--dataset.repo_id=local/hilbot_sweep",
            f"--dataset.root={root}", "--dataset.episode=0", "--play_sounds=false",
            home=tmp_path,
        )  # fmt: skip
        after = _goals(robot, tmp_path)
    # The follower ended where the episode ended: lerobot-replay disconnects right after
    # the last frame, and the disconnect is a controlled stop from the motion layer's
    # command (LeRobot's own class leaves the last goal on the bus instead). A joint still
    # in the last 20 frames ends at the last goal (a few ticks); a moving one within its
    # span over those frames, give or take half of it (the command's lag behind the
    # stream, or the stop's braking past the last frame: 86 ticks, 0.13 rad, seen from a
    # sweep at full speed).
    tail = [dict(zip(names, a, strict=True)) for a in actions[-20:]]
    expected = client("unnormalize", str(tmp_path / "lerobot-files"), "arm", json.dumps(tail),
                      home=tmp_path)  # fmt: skip
    assert isinstance(expected, list)
    for name in names:
        values = [frame[name] for frame in expected]
        lo, hi = min(values), max(values)
        allowance = 6 + 0.5 * (hi - lo)  # ticks
        assert lo - allowance <= after[name] <= hi + allowance, (name, after[name], values)
    assert any(abs(after[n] - before[n]) > 40 for n in names), (before, after)


def test_lerobot_calibrate_runs_hilbots_guided_flow(tmp_path: Path) -> None:
    folder = tmp_path / "lerobot-files"
    lerobot_command("lerobot-calibrate", *FOLLOWER, "--robot.backend=virtual",
                    f"--robot.calibration_dir={folder}", home=tmp_path)  # fmt: skip
    ours = tmp_path / "config" / "hilbot" / "calibration" / "so101_follower-virtual.yaml"
    assert ours.is_file()
    theirs = json.loads((folder / "arm.json").read_text())
    assert set(theirs) == {"shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex",
                           "wrist_roll", "gripper"}  # fmt: skip
    # LeRobot's own SO-101 class loads the file the hilbot robot wrote
    done = subprocess.run(
        [LEROBOT_PYTHON, str(HERE / "lerobot_calibration_client.py"), "so101", str(folder), "arm"],
        capture_output=True, text=True, timeout=600, env=_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["calibration"] == theirs


def test_lerobot_record_with_a_camera(tmp_path: Path) -> None:
    """``--robot.cameras`` as for LeRobot's robots: a network camera (LeRobot's ZMQ
    camera, served by a process in its wire format) read off the control loop.

    LeRobot's ZMQ camera needs pyzmq: ``pip install 'lerobot[feetech,dynamixel,lekiwi]'``.
    """
    probe = subprocess.run([LEROBOT_PYTHON, "-c", "import zmq"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("LeRobot's ZMQ camera needs pyzmq: install lerobot[lekiwi] (or pyzmq)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = [LEROBOT_PYTHON, str(HERE / "zmq_camera_server.py"), str(port), "front", "64", "48"]
    with subprocess.Popen(server, stdout=subprocess.PIPE, text=True) as camera:
        try:
            assert camera.stdout is not None and camera.stdout.readline().strip() == "serving"
            cameras = (f"{{front: {{type: zmq, server_address: 127.0.0.1, port: {port}, "
                       "camera_name: front, width: 64, height: 48, fps: 30}}")  # fmt: skip
            root = tmp_path / "dataset"
            lerobot_command(
                "lerobot-record", *FOLLOWER, "--robot.backend=sim", f"--robot.cameras={cameras}",
                "--teleop.type=hilbot", "--teleop.config=so101_leader",
                "--dataset.repo_id=local/hilbot_camera", f"--dataset.root={root}",
                "--dataset.num_episodes=1", "--dataset.episode_time_s=3",
                "--dataset.fps=30", "--dataset.push_to_hub=false", "--dataset.single_task=look",
                "--display_data=false", "--play_sounds=false",  # video on: else no images
                home=tmp_path,
            )  # fmt: skip
        finally:
            camera.terminate()
            camera.wait(30)
    got = client("dataset", str(root), "local/hilbot_camera", home=tmp_path)
    assert isinstance(got, dict)
    assert got["cameras"] == {"observation.images.front": [48, 64, 3]}
    assert 45 <= got["num_frames"] <= 3 * 30 + 2
    means = got["image_means"]["observation.images.front"]
    assert len(set(round(m, 3) for m in means)) > 1, means  # frames of the live stream
