"""Calibrate, then run, every shipped robot on its virtual bus; refusals name a way out that works.

The demo calibration is real time (about 10-20 s a robot on a busy host): each robot is
calibrated once per test run (``calibrated``) and its file reused by the tests here.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from hilbot.configs import robot_names
from hilbot.driver.calibration import files
from hilbot.driver.calibration.checks import Limits, range_problems
from hilbot.driver.runtime.config import load_config
from hilbot.hal.calibration import Calibration, JointCalibration
from tests.driver.conftest import DemoCalibration

#: Shipped robots calibrate does not handle, and the one line that says why.
NOT_CALIBRATED = {
    "bimanual": "single-bus robots",
    "widowx_250s": "shadows of another servo",
}


def _hilbot(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "XDG_CONFIG_HOME": str(home)},
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def _demo(robot: str, home: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return _hilbot("calibrate", robot, "--backend", "virtual", "--demo", *more, home=home)


def _run(robot: str, home: Path) -> subprocess.CompletedProcess[str]:
    run = ["-v", "run", robot, "--backend", "virtual", "--no-mqtt", "--no-status", "--enable"]
    return _hilbot(*run, "--duration", "1", home=home)


@pytest.fixture
def calibrated(
    demo_calibration: Callable[[str], DemoCalibration],
) -> Callable[[str], Path]:
    """``calibrated(robot)``: a config home holding the robot's demo calibration.

    Each robot is calibrated once per test run (``demo_calibration``); a test that changes
    the file copies it.
    """
    return lambda robot: demo_calibration(robot).home


def _copy(home: Path, to: Path) -> Path:
    shutil.copytree(home, to, dirs_exist_ok=True)
    return to


@pytest.mark.parametrize("robot", robot_names())
def test_every_shipped_robot_calibrates_and_then_runs_on_its_virtual_bus(
    robot: str, calibrated: Callable[[str], Path], tmp_path: Path
) -> None:
    if robot in NOT_CALIBRATED:
        done = _demo(robot, tmp_path)
        assert done.returncode == 2 and NOT_CALIBRATED[robot] in _one_line(done)
        ran = _run(robot, tmp_path)  # it runs without one
        assert ran.returncode == 0, ran.stderr
        return
    home = calibrated(robot)
    saved = files.read(home / "hilbot" / "calibration" / f"{robot}-virtual.yaml")
    ids = [s.id for s in load_config(robot).servo_specs()]
    assert saved.mounts == (f"{ids[1]}:-12", f"{ids[2]}:25:reversed")  # servos of this arm
    ran = _run(robot, home)
    assert ran.returncode == 0, ran.stderr
    assert "virtual arm assembled as calibrated" in ran.stderr
    assert "command enable done" in ran.stderr


def _trapped(robot: str, home: Path) -> Path:
    """The file an older hilbot wrote: the Koch's mounts on an arm without servos 2 and 3."""
    path = home / "hilbot" / "calibration" / f"{robot}-virtual.yaml"
    data = yaml.safe_load(path.read_text())
    data[files.MOUNTS_KEY] = ["2:-12", "3:25:reversed"]
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_run_refused_for_its_calibration_names_two_ways_out_and_both_work(
    calibrated: Callable[[str], Path], tmp_path: Path
) -> None:
    robot = "openmanipulator_x"
    home = _copy(calibrated(robot), tmp_path / "one")
    path = _trapped(robot, home)
    refused = _run(robot, home)
    assert refused.returncode == 2
    line = _one_line(refused)
    assert "no servo 2 on openmanipulator_x" in line and f"remove {path}" in line, line
    command = line.split("`")[1]
    assert command == f"hilbot calibrate {robot} --backend virtual --demo"
    again = _hilbot(*shlex.split(command)[1:], home=home)  # way out 1, as printed
    assert again.returncode == 0, again.stderr
    assert files.read(path).mounts == ("12:-12", "13:25:reversed")
    ran = _run(robot, home)
    assert ran.returncode == 0, ran.stderr
    other = _copy(calibrated(robot), tmp_path / "two")
    _trapped(robot, other).unlink()  # way out 2: the file removed
    ran = _run(robot, other)
    assert ran.returncode == 0, ran.stderr


def test_a_demo_that_measures_a_range_the_hand_did_not_sweep_writes_nothing(
    tmp_path: Path,
) -> None:
    # The wrist servo mounted 60° off reaches the end of its travel before the hand has
    # the joint at its lower end: the range measured is short, and the hand's sweep again
    # cannot change that.
    done = _demo("koch_v1_1_follower", tmp_path, "--mount", "5:60")
    assert done.returncode == 1
    line = _one_line(done)
    assert line.startswith("hilbot calibrate: nothing written: wrist_roll measured"), line
    assert "the hand swept it -152..+152°" in line and "Run the command again" in line
    assert "not seen at both ends: wrist_roll" in done.stdout  # swept again first
    assert not (tmp_path / "hilbot" / "calibration").exists()


def _calibration(**ranges: tuple[float, float]) -> Calibration:
    joints = {
        j: JointCalibration(servo_id=i + 1, offset=0.0, direction=1, lower=lo, upper=hi)
        for i, (j, (lo, hi)) in enumerate(ranges.items())
    }
    return Calibration("arm", "ttyUSB0", joints, "2026-01-01T00:00:00+00:00")


def test_ranges_past_the_urdf_are_refused_and_narrow_ones_warned() -> None:
    limits = {"a": Limits(-1.0, 1.0), "b": Limits(-1.0, 1.0), "c": Limits(0.0, 0.02, True)}
    measured = _calibration(a=(-1.2, 0.9), b=(-0.3, 0.4), c=(0.0, 0.0198))
    problems = {p.joint: p for p in range_problems(measured, limits)}
    assert problems["a"].refuse and "past its URDF range -57..+57°" in problems["a"].text
    assert not problems["b"].refuse and "35% of its URDF range" in problems["b"].text
    assert "c" not in problems
    # On the demo, the hand's sweep is the reference: -58..+152 of a ±152° sweep.
    wrist = _calibration(w=(-1.012, 2.653))
    swept = {"w": (-2.653, 2.653)}
    (problem,) = range_problems(wrist, {"w": Limits(-2.79, 2.79)}, swept)
    assert problem.refuse and problem.text == (
        "w measured -58..+152°, but the hand swept it -152..+152°"
    )
    assert range_problems(_calibration(w=(-2.66, 2.65)), {}, swept) == []
