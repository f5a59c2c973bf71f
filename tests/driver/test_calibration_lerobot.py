"""LeRobot's calibration files in and out: ``hilbot calibrate --from-lerobot / --to-lerobot``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hilbot.driver.calibration import files
from hilbot.driver.calibration.files import CalibrationFileError
from hilbot.driver.calibration.lerobot import from_lerobot, read_file, to_lerobot
from hilbot.driver.runtime.config import load_config
from tests.driver.conftest import DemoCalibration

MOTORS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
RAD_PER_TICK = 2 * math.pi / 4096


def _hilbot(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args], capture_output=True, text=True, timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(home)},
    )  # fmt: skip


def _lerobot_file(path: Path, low: int = 1047, high: int = 3047, homing: int = 0) -> Path:
    data = {
        name: {"id": i + 1, "drive_mode": 0, "homing_offset": homing, "range_min": low,
               "range_max": high}
        for i, name in enumerate(MOTORS)
    }  # fmt: skip
    path.write_text(json.dumps(data, indent=4))
    return path


def _joint(cal: object, name: str, ticks: float) -> float:
    j = cal.joints[name]  # type: ignore[attr-defined]
    return float(j.offset + j.direction * (ticks - 2048) * RAD_PER_TICK)


def test_import_reads_lerobots_ticks_as_its_middle_pose_and_range(tmp_path: Path) -> None:
    config = load_config("so101_follower")
    data = read_file(_lerobot_file(tmp_path / "so.json"))
    cal = from_lerobot(data, config, "virtual", tmp_path / "so.json")
    for name in MOTORS:
        assert _joint(cal, name, 2047) == pytest.approx(0.0, abs=1e-9)  # middle pose: zero
        j = cal.joints[name]
        assert (j.lower, j.upper) == pytest.approx((-1000 * RAD_PER_TICK, 1000 * RAD_PER_TICK))
        assert j.homing_offset == 0 and j.servo_id == MOTORS.index(name) + 1


def test_export_then_import_maps_the_servos_ticks_to_the_same_joints(
    tmp_path: Path, demo_calibration: Callable[[str], DemoCalibration]
) -> None:
    home = demo_calibration("so101_follower").copy(tmp_path / "home")  # once per test run
    mine = files.default_path("so101_follower", "", virtual=True).name
    original = files.load(home / "hilbot" / "calibration" / mine)
    out = tmp_path / "lerobot.json"
    done = _hilbot("calibrate", "so101_follower", "--backend", "virtual", "--to-lerobot",
                   str(out), home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    exported = json.loads(out.read_text())
    assert list(exported) == MOTORS
    for motor in exported.values():
        assert set(motor) == {"id", "drive_mode", "homing_offset", "range_min", "range_max"}
        assert all(isinstance(v, int) for v in motor.values())
        assert 0 <= motor["range_min"] < motor["range_max"] <= 4095
    # the demo's elbow servo is turned around: LeRobot's Feetech drive_mode says so
    assert exported["elbow_flex"]["drive_mode"] == 1 and exported["shoulder_pan"]["drive_mode"] == 0
    back_path = tmp_path / "back.yaml"
    done = _hilbot("calibrate", "so101_follower", "--backend", "virtual", "--from-lerobot",
                   str(out), "--out", str(back_path), home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    back = files.load(back_path)
    for name in MOTORS:
        was, now = original.joints[name], back.joints[name]
        assert now.direction == was.direction
        assert (now.lower, now.upper) == pytest.approx((was.lower, was.upper), abs=2e-3)
        # LeRobot writes its Homing Offset to the servo (Feetech: present = raw - homing):
        # the same servo then reads ``shift`` ticks more, at the same joint position
        shift = -(exported[name]["homing_offset"] - (was.homing_offset or 0))
        for ticks in (1500, 2048, 2600):
            assert _joint(back, name, ticks + shift) == pytest.approx(
                _joint(original, name, ticks), abs=2e-3
            )


def test_an_imported_calibration_runs_on_the_virtual_bus(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _hilbot("calibrate", "so101_follower", "--backend", "virtual", "--from-lerobot",
                   str(_lerobot_file(tmp_path / "so.json")), home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "imported to" in done.stdout
    done = _hilbot("run", "so101_follower", "--backend", "virtual", "--enable", "--duration",
                   "1", "--no-mqtt", "--no-status", home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "applying the calibration" in done.stderr or "torque off" in done.stdout


def test_a_stale_imported_calibration_is_refused_before_anything_is_enabled(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    stale = _lerobot_file(tmp_path / "so.json", low=2150, high=3047)  # the arm reads 2048
    done = _hilbot("calibrate", "so101_follower", "--backend", "virtual", "--from-lerobot",
                   str(stale), home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = _hilbot("run", "so101_follower", "--backend", "virtual", "--enable", "--duration",
                   "1", "--no-mqtt", "--no-status", home=home)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "no longer matches the arm" in done.stderr and "Nothing was enabled" in done.stderr


def test_lerobots_full_turn_wrist_roll_is_cut_to_the_urdf(tmp_path: Path) -> None:
    path = _lerobot_file(tmp_path / "so.json")
    data = json.loads(path.read_text())
    data["wrist_roll"].update(range_min=0, range_max=4095)  # LeRobot's full-turn motor
    path.write_text(json.dumps(data))
    done = _hilbot("calibrate", "so101_follower", "--backend", "virtual", "--from-lerobot",
                   str(path), "--out", str(tmp_path / "c.yaml"), home=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrist_roll: range cut to the URDF's" in done.stdout


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json", "is not JSON"),
        ('{"shoulder_pan": {"id": 1}}', "expected the integers id, drive_mode"),
        ('{"elbow": {"id": 1, "drive_mode": 0, "homing_offset": 0, "range_min": 1, '
         '"range_max": 2}}', "not joints of so101_follower"),
    ],
)  # fmt: skip
def test_bad_lerobot_files_are_one_line(content: str, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    done = _hilbot("calibrate", "so101_follower", "--from-lerobot", str(path), home=tmp_path)
    assert done.returncode == 2 and problem in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_wrong_ids_and_a_missing_joint_are_named(tmp_path: Path) -> None:
    config = load_config("so101_follower")
    data = read_file(_lerobot_file(tmp_path / "so.json"))
    data["gripper"]["id"] = 9
    with pytest.raises(CalibrationFileError, match="gripper is motor 9 there but servo 6"):
        from_lerobot(data, config, "virtual", tmp_path / "so.json")
    del data["gripper"]
    with pytest.raises(CalibrationFileError, match="no calibration of gripper"):
        from_lerobot(data, config, "virtual", tmp_path / "so.json")


def test_export_without_a_calibration_says_what_to_run(tmp_path: Path) -> None:
    done = _hilbot("calibrate", "so101_follower", "--to-lerobot", str(tmp_path / "x.json"),
                   home=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "run `hilbot calibrate so101_follower` first" in done.stderr


def test_koch_exports_keep_drive_mode_zero(tmp_path: Path) -> None:
    config = load_config("koch_v1_1_follower")
    data = {
        name: {"id": i + 1, "drive_mode": 0, "homing_offset": 5, "range_min": 1000,
               "range_max": 3000}
        for i, name in enumerate(MOTORS)
    }  # fmt: skip
    cal = from_lerobot(data, config, "virtual", tmp_path / "k.json")
    again = to_lerobot(cal, config)
    assert {m["drive_mode"] for m in again.values()} == {0}
    assert again["elbow_flex"] == data["elbow_flex"]
