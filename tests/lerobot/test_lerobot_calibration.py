"""LeRobot's own robot classes read the calibration files ``hilbot calibrate --to-lerobot``
writes, and hilbot imports what LeRobot's classes save (skipped without
``HILBOT_LEROBOT_PYTHON``; see test_lerobot_motor_buses.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hilbot.driver.calibration import files

LEROBOT_PYTHON = os.environ.get("HILBOT_LEROBOT_PYTHON", "")
CLIENT = Path(__file__).with_name("lerobot_calibration_client.py")

pytestmark = pytest.mark.skipif(
    not LEROBOT_PYTHON, reason="HILBOT_LEROBOT_PYTHON (a python with lerobot) is not set"
)


def _hilbot(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(home)},
    )


def _lerobot(kind: str, folder: Path, robot_id: str) -> dict[str, object]:
    done = subprocess.run(
        [LEROBOT_PYTHON, str(CLIENT), kind, str(folder), robot_id],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(("robot", "kind"), [("so101_follower", "so101"),
                                             ("koch_v1_1_follower", "koch")])  # fmt: skip
def test_lerobot_reads_the_exported_file_and_hilbot_reads_it_back(
    robot: str, kind: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    done = _hilbot("calibrate", robot, "--backend", "virtual", "--demo", "--yes", home=home)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "lerobot"
    folder.mkdir()
    exported = folder / "my_arm.json"
    done = _hilbot("calibrate", robot, "--backend", "virtual", "--to-lerobot", str(exported),
                   home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = _lerobot(kind, folder, "my_arm")
    assert got["calibration"] == json.loads(exported.read_text())
    assert got["bus_calibration"] == got["calibration"]
    assert got["action_features"] == [f"{m}.pos" for m in got["calibration"]]  # type: ignore[attr-defined]
    back = tmp_path / "back.yaml"
    done = _hilbot("calibrate", robot, "--backend", "virtual", "--from-lerobot", str(exported),
                   "--out", str(back), home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert set(files.load(back).joints) == set(got["calibration"])  # type: ignore[arg-type]


@pytest.mark.parametrize(("robot", "kind"), [("so101_follower", "so101"),
                                             ("koch_v1_1_follower", "koch")])  # fmt: skip
def test_dataset_values_equal_lerobots_for_the_same_servo_readings(
    robot: str, kind: str, tmp_path: Path
) -> None:
    """hilbot's dataset units from the joint value = LeRobot's bus from the ticks.

    The Koch's demo arm has no servo turned around: a Dynamixel's reversal cannot be said
    in LeRobot's file without reversing the servo itself (docs/lerobot.md).
    """
    import math

    from hilbot.driver.calibration.apply import calibrated_config
    from hilbot.driver.dataset.features import features_for
    from hilbot.driver.runtime.config import load_config

    home = tmp_path / "home"
    mounts = ["--mount", "2:-12"] if kind == "koch" else []  # SO-101: the default, one reversed
    done = _hilbot("calibrate", robot, "--backend", "virtual", "--demo", "--yes", *mounts,
                   home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "lerobot"
    folder.mkdir()
    exported = folder / "arm.json"
    done = _hilbot("calibrate", robot, "--backend", "virtual", "--to-lerobot", str(exported),
                   home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    back = tmp_path / "back.yaml"
    done = _hilbot("calibrate", robot, "--backend", "virtual", "--from-lerobot", str(exported),
                   "--out", str(back), home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    config = load_config(robot)
    calibration = files.load(back)
    features = features_for(
        calibrated_config(config, calibration, "", back), calibration, uncalibrated=config
    )
    lerobot_cal = json.loads(exported.read_text())
    # readings inside each range: a quarter and three quarters of the way
    for share in (0.25, 0.75):
        ticks = {
            name: round(m["range_min"] + share * (m["range_max"] - m["range_min"]))
            for name, m in lerobot_cal.items()
        }
        theirs = json.loads(
            subprocess.run(
                [LEROBOT_PYTHON, str(CLIENT), kind, str(folder), "arm", json.dumps(ticks)],
                capture_output=True, text=True, timeout=600, check=True,
            ).stdout.strip().splitlines()[-1]
        )  # fmt: skip
        joints = {}
        for name, t in ticks.items():
            j = calibration.joints[name]
            joints[name] = j.offset + j.direction * (t - 2048) * 2 * math.pi / 4096
        ours = dict(zip(features.joints, features.vector(joints), strict=True))
        for name in ticks:
            assert ours[name] == pytest.approx(theirs[name], abs=0.2), (name, share)
