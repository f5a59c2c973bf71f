"""LeRobot's FeetechMotorsBus and DynamixelMotorsBus against ``hilbot sim-bus``.

LeRobot runs in its own environment (it needs torch): ``HILBOT_LEROBOT_PYTHON`` names
that environment's python, e.g. after

    python -m venv ~/lerobot-venv && ~/lerobot-venv/bin/pip install lerobot==0.4.4

Without it these tests are skipped. The virtual buses run in this environment, LeRobot's
code in that one, on the same pty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

LEROBOT_PYTHON = os.environ.get("HILBOT_LEROBOT_PYTHON", "")
CLIENT = Path(__file__).with_name("lerobot_client.py")

pytestmark = pytest.mark.skipif(
    not LEROBOT_PYTHON, reason="HILBOT_LEROBOT_PYTHON (a python with lerobot) is not set"
)


@contextmanager
def sim_bus(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    command = [sys.executable, "-m", "hilbot", "sim-bus", *args]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert ": /dev/" in line, line
            yield line.split()[1], process
        finally:
            process.terminate()
            process.wait(timeout=30)


def lerobot(step: str, port: str) -> dict[str, object]:
    done = subprocess.run(
        [LEROBOT_PYTHON, str(CLIENT), step, port], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_feetech_configure_reads_back_what_it_wrote(tmp_path: Path) -> None:
    with sim_bus("so101_follower", "--eeprom-file", str(tmp_path / "arm.json")) as (port, _):
        got = lerobot("feetech-configure", port)
    assert set(got["Maximum_Acceleration"].values()) == {254}  # type: ignore[attr-defined]
    assert set(got["Acceleration"].values()) == {254}  # type: ignore[attr-defined]
    assert set(got["Return_Delay_Time"].values()) == {0}  # type: ignore[attr-defined]


def test_feetech_scan_finds_the_arm_at_its_rate_only(tmp_path: Path) -> None:
    with sim_bus("so101_follower", "--no-persist") as (port, _):
        got = lerobot("feetech-scan", port)
    assert got["found"] == {"1000000": [1, 2, 3, 4, 5, 6]}


def test_feetech_eeprom_survives_a_restart_of_the_bus(tmp_path: Path) -> None:
    state = str(tmp_path / "arm.json")
    with sim_bus("so101_follower", "--eeprom-file", state) as (port, _):
        assert lerobot("feetech-offset-write", port)["Homing_Offset"] == 321
    with sim_bus("so101_follower", "--eeprom-file", state) as (port, _):
        got = lerobot("feetech-offset-read", port)
    assert (got["Homing_Offset"], got["Max_Position_Limit"]) == (321, 3000)


def test_lerobot_setup_motors_on_one_feetech_bus(tmp_path: Path) -> None:
    state = str(tmp_path / "arm.json")
    with sim_bus("so101_follower", "--plug-in-one-at-a-time", "--eeprom-file", state) as (port, _):
        got = lerobot("feetech-setup", port)
    assert got["ids"] == [1, 2, 3, 4, 5, 6]
    # Each one straight from the box: id 1 at the STS3215's factory 1 Mbit/s.
    assert set(map(tuple, got["found_at"].values())) == {(1_000_000, 1)}  # type: ignore[attr-defined]
    with sim_bus("so101_follower", "--eeprom-file", state) as (port, _):
        assert lerobot("feetech-scan", port)["found"] == {"1000000": [1, 2, 3, 4, 5, 6]}


def test_feetech_setup_motor_finds_a_servo_at_another_rate(tmp_path: Path) -> None:
    state = str(tmp_path / "servo.json")
    one = ("--servo", "1:STS3215", "--family", "feetech", "--eeprom-file", state)
    with sim_bus(*one) as (port, _):
        lerobot("feetech-rebaud", port)  # Baud_Rate 1: 500 kbit/s, kept in EEPROM
    with sim_bus(*one) as (port, _):
        assert lerobot("feetech-scan", port)["found"] == {"500000": [1]}
        got = lerobot("feetech-setup-gripper", port)
    # Found at 500 kbit/s as id 1; then id 6 answers at 1 Mbit/s with its model (STS3215: 777).
    assert got["found_at"] == [500_000, 1] and got["ping"] == 777  # type: ignore[comparison-overlap]
    with sim_bus(*one) as (port, _):  # id 6 at the arm's 1 Mbit/s, after a restart too
        assert lerobot("feetech-scan", port)["found"] == {"1000000": [6]}


def test_dynamixel_goal_current_starts_at_its_limit(tmp_path: Path) -> None:
    with sim_bus("koch_v1_1_follower", "--no-persist") as (port, _):
        got = lerobot("dynamixel-configure", port)
    assert got["Goal_Current"] == got["Current_Limit"] and got["Goal_Current"]
    assert got["Goal_PWM"] == 885


def test_dynamixel_scan_and_setup_motors(tmp_path: Path) -> None:
    with sim_bus("koch_v1_1_follower", "--no-persist") as (port, _):
        assert lerobot("dynamixel-scan", port)["found"] == {"1000000": [1, 2, 3, 4, 5, 6]}
    state = str(tmp_path / "koch.json")
    with sim_bus("koch_v1_1_follower", "--plug-in-one-at-a-time", "--eeprom-file", state) as (
        port,
        _,
    ):
        got = lerobot("dynamixel-setup", port)
    assert got["ids"] == [1, 2, 3, 4, 5, 6]
    # Each one straight from the box: id 1 at the XL430's and XL330's factory 57600 bit/s,
    # moved to the arm's 1 Mbit/s; kept across a restart of the bus.
    assert set(map(tuple, got["found_at"].values())) == {(57_600, 1)}  # type: ignore[attr-defined]
    with sim_bus("koch_v1_1_follower", "--eeprom-file", state) as (port, _):
        assert lerobot("dynamixel-scan", port)["found"] == {"1000000": [1, 2, 3, 4, 5, 6]}
