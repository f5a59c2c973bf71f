"""A virtual arm's calibration records its assembly; calibrate hints name what the user typed.

The demo calibrations are real time: each robot's is made once per test run
(``demo_calibration``, tests/driver/conftest.py), and a test that changes it works on a copy.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.bench.recording import Recording
from hilbot.driver.calibration import files
from hilbot.driver.runtime.config import load_config
from tests.driver.conftest import DemoCalibration


def _hilbot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def _first_reading(path: Path) -> dict[str, float]:
    recording = Recording.load(path)
    row = recording["q_measured"][0]
    return dict(zip(recording.header.joint_names, map(float, row), strict=True))


def _yaml_copy(robot: str, folder: Path, **changes: object) -> Path:
    source = config_path(robot)
    data = yaml.safe_load(source.read_text())
    data["urdf"] = str(source.parent / data["urdf"])
    data.update(changes)
    path = folder / f"my_{robot}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("robot", ["koch_v1_1_follower", "so101_follower"])
def test_a_virtual_run_after_the_demo_calibration_is_assembled_as_calibrated(
    robot: str, tmp_path: Path, demo_calibration: Callable[[str], DemoCalibration]
) -> None:
    done = demo_calibration(robot)
    assert "--mount 2:-12 --mount 3:25:reversed" in done.stdout  # the final hint says so
    saved = files.read(done.file)
    assert saved.mounts == ("2:-12", "3:25:reversed")
    env = {"XDG_CONFIG_HOME": str(done.copy(tmp_path / "home"))}
    record = tmp_path / "run.npz"
    run = ["-v", "run", robot, "--backend", "virtual", "--no-mqtt", "--no-status"]
    ran = _hilbot(*run, "--enable", "--duration", "1", "--record", str(record), env=env)
    assert ran.returncode == 0, ran.stderr
    assert "virtual arm assembled as calibrated: --mount 2:-12 --mount 3:25:reversed" in (
        ran.stderr
    )
    home = load_config(robot).home
    first = _first_reading(record)
    for joint, q in home.items():
        assert first[joint] == pytest.approx(q, abs=0.03), joint  # the elbow's sign too


def test_an_explicit_mount_wins_over_the_recorded_one(
    tmp_path: Path, demo_calibration: Callable[[str], DemoCalibration]
) -> None:
    robot = "koch_v1_1_follower"
    env = {"XDG_CONFIG_HOME": str(demo_calibration(robot).copy(tmp_path / "home"))}
    record = tmp_path / "run.npz"
    run = ["-v", "run", robot, "--backend", "virtual", "--no-mqtt", "--no-status"]
    ran = _hilbot(*run, "--mount", "2:-12", "--duration", "1", "--record", str(record), env=env)
    assert ran.returncode == 0, ran.stderr
    assert "assembled as calibrated" not in ran.stderr
    first = _first_reading(record)
    home = load_config(robot).home
    assert first["shoulder_lift"] == pytest.approx(home["shoulder_lift"], abs=0.03)
    # the elbow servo is mounted as the config says, not turned around: the calibration
    # (25 deg off, reversed) reads it at 25 deg - home
    elbow = 0.43633 - home["elbow_flex"]
    assert first["elbow_flex"] == pytest.approx(elbow, abs=0.03)


def test_the_required_calibration_hint_names_the_yaml_and_the_port(tmp_path: Path) -> None:
    robot = _yaml_copy("koch_v1_1_follower", tmp_path, calibration="required")
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    port = str(tmp_path / "ttyUSB9")  # no such port: the hint comes before any port opens
    run = ["run", str(robot), "--no-mqtt", "--enable"]
    done = _hilbot(*run, "--backend", "hardware", "--port", port, env=env)
    assert done.returncode == 2
    assert f"`hilbot calibrate {robot} --port {port}`" in done.stderr
    # the file calibrate writes with that --port is the one the run looks for
    assert str(tmp_path / "hilbot" / "calibration" / "koch_v1_1_follower-ttyUSB9.yaml") in (
        done.stderr
    )
    virtual = _hilbot(*run, "--backend", "virtual", "--duration", "1", env=env)
    assert virtual.returncode == 2
    hint = f"hilbot calibrate {robot} --backend virtual --demo"
    assert f"`{hint}`" in virtual.stderr
    calibrated = _hilbot(*shlex.split(hint)[1:], env=env)  # the hint works as printed
    assert calibrated.returncode == 0, calibrated.stderr
    again = _hilbot(*run, "--backend", "virtual", "--duration", "1", "--no-status", env=env)
    assert again.returncode == 0, again.stderr


def test_lead_with_a_wrong_port_names_the_config_setting(tmp_path: Path) -> None:
    port = str(tmp_path / "ttyNOPE")
    buses = yaml.safe_load(config_path("koch_v1_1_leader").read_text())["buses"]
    leader = _yaml_copy("koch_v1_1_leader", tmp_path, buses=[{**buses[0], "port": port}])
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    lead = ["lead", str(leader), "--to", "koch_v1_1_follower", "--mqtt", "mqtt://127.0.0.1:1"]
    done = _hilbot(*lead, "--duration", "1", env=env)
    assert done.returncode == 2
    assert f"buses[0].port of the leader config {leader}" in done.stderr
    assert "--port or" not in done.stderr  # lead has no --port
    assert "Traceback" not in done.stderr


def test_a_recorded_mount_naming_no_servo_of_the_arm_is_refused(
    tmp_path: Path, demo_calibration: Callable[[str], DemoCalibration]
) -> None:
    # A file edited by hand, or recorded for another arm: refused at load, naming the field,
    # before any virtual bus starts (not as that bus's own exit).
    robot = "koch_v1_1_follower"
    home = demo_calibration(robot).copy(tmp_path / "home")
    env = {"XDG_CONFIG_HOME": str(home)}
    path = home / "hilbot" / "calibration" / f"{robot}-virtual.yaml"
    data = yaml.safe_load(path.read_text())
    data[files.MOUNTS_KEY] = ["9:10"]
    path.write_text(yaml.safe_dump(data))
    ran = _hilbot("run", robot, "--backend", "virtual", "--no-mqtt", "--duration", "1", env=env)
    assert ran.returncode == 2, ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "virtual_mounts do not fit koch_v1_1_follower" in lines[0]
    assert "no servo 9 on koch_v1_1_follower" in lines[0]
    assert "virtual bus exited" not in lines[0]
