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
