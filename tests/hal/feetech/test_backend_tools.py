"""hilbot scan / servo / doctor --family feetech against the virtual Feetech bus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.cli import main
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.sim.virtual_bus import FeetechVirtualBus

MARGIN = ["--margin-ms", "50"]  # the loaded test machine: generous reply slack


@pytest.fixture
def vbus() -> Iterator[FeetechVirtualBus]:
    with FeetechVirtualBus({1: "STS3215", 3: "STS3250"}, 1_000_000, return_delay_time=0) as bus:
        yield bus
        assert bus.errors == []


def test_scan_lists_ids_models_firmware_and_baud(vbus, capsys):
    args = ["scan", "--family", "feetech", "--port", vbus.port, "--ids", "1-4", *MARGIN]
    assert main(args) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:] if line.strip()]
    assert [r[0] for r in rows] == ["1", "3"]
    assert rows[0][1] == "STS3215/STS3215-12V" and rows[0][2] == "777"
    assert rows[1][1] == "STS3250" and rows[1][2] == "2825"
    assert rows[0][3] == "3.6" and rows[0][4] == "1000000"


def test_scan_of_an_empty_range_says_so(vbus, capsys):
    assert main(["scan", "--family", "feetech", "--port", vbus.port, "--ids", "7-8"]) == 1
    assert "no Feetech servo answered" in capsys.readouterr().out


def test_scan_of_a_missing_port_is_one_line(capsys):
    assert main(["scan", "--family", "feetech", "--port", "/dev/nonexistent-hilbot"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_servo_sets_id_saved_behind_the_lock(vbus, capsys):
    base = ["servo", "--family", "feetech", "--port", vbus.port, "--id", "1"]
    assert main([*base, "--set-id", "5"]) == 0
    assert "is now id 5" in capsys.readouterr().out
    servo = vbus.servo(5)
    assert servo.memory.get(N.ID) == 5
    assert servo.memory.get(N.LOCK) == 1  # locked again after the write
    assert main(["scan", "--family", "feetech", "--port", vbus.port, "--ids", "1-5"]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line.strip()]
    assert ids == ["3", "5"]


def test_servo_refuses_a_taken_id_and_changes_nothing(vbus, capsys):
    base = ["servo", "--family", "feetech", "--port", vbus.port, "--id", "1"]
    assert main([*base, "--set-id", "3"]) == 1
    assert "taken" in capsys.readouterr().err
    assert vbus.servo(1).memory.get(N.ID) == 1


def test_servo_sets_limits_offset_and_return_delay(vbus, capsys):
    base = ["servo", "--family", "feetech", "--port", vbus.port, "--id", "3"]
    args = ["--min-angle-limit", "100", "--max-angle-limit", "4000", "--homing-offset", "-20"]
    assert main([*base, *args, "--return-delay", "5"]) == 0
    memory = vbus.servo(3).memory
    assert memory.get(N.MIN_ANGLE_LIMIT) == 100
    assert memory.get(N.MAX_ANGLE_LIMIT) == 4000
    assert memory.get(N.HOMING_OFFSET) == -20  # sign-magnitude, bit 11
    assert memory.get(N.RETURN_DELAY_TIME) == 5


def test_servo_refuses_a_value_out_of_range_in_one_line(vbus, capsys):
    base = ["servo", "--family", "feetech", "--port", vbus.port, "--id", "3"]
    assert main([*base, "--homing-offset", "5000"]) == 1
    err = capsys.readouterr().err
    assert "Homing Offset" in err and err.count("\n") == 1


def test_servo_refuses_dynamixel_only_options(vbus, capsys):
    base = ["servo", "--family", "feetech", "--port", vbus.port, "--id", "3"]
    assert main([*base, "--pwm-limit", "100"]) == 2
    assert "--pwm-limit is for Dynamixel" in capsys.readouterr().err


def test_servo_changes_the_baud_rate_and_answers_there(vbus, capsys):
    base = ["servo", "--family", "feetech", "--port", vbus.port, "--id", "1"]
    assert main([*base, "--set-baud", "500000"]) == 0
    assert "now talks at 500000 bit/s" in capsys.readouterr().out
    assert vbus.servo(1).memory.get(N.BAUD_RATE) == 1  # 500 000 bit/s
    args = ["scan", "--family", "feetech", "--port", vbus.port, "--ids", "1-3"]
    assert main([*args, "--baud", "500000", *MARGIN]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line.strip()]
    assert ids == ["1"]


def _so101_on(port: str, tmp_path: Path) -> Path:
    path = config_path("so101_follower")
    data = yaml.safe_load(path.read_text())
    data["urdf"] = str(path.parent / data["urdf"])
    data["buses"][0]["port"] = port
    out = tmp_path / "so101.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def test_doctor_checks_every_servo_and_prints_the_budget(tmp_path, capsys):
    ids = {i: "STS3215" for i in range(1, 7)}
    with FeetechVirtualBus(ids, 1_000_000, return_delay_time=0) as bus:
        bus.servo(2).memory.set(N.RETURN_DELAY_TIME, 250)
        assert main(["doctor", str(_so101_on(bus.port, tmp_path)), *MARGIN]) == 0
    out = capsys.readouterr().out
    assert "Feetech, 6 servos" in out
    assert "[ warn] servo 2 (shoulder_lift): return delay 500 µs" in out
    assert out.count("[   ok] servo") >= 17
    assert "servo 1 (shoulder_pan): max torque 100 %" in out
    assert "124 B x 10 bit" in out and "at most" in out


def test_doctor_reports_a_missing_servo_as_an_error(tmp_path, capsys):
    with FeetechVirtualBus({i: "STS3215" for i in range(1, 6)}, 1_000_000) as bus:
        assert main(["doctor", str(_so101_on(bus.port, tmp_path)), *MARGIN]) == 1
    assert "[error] servo 6 (gripper): does not answer a ping" in capsys.readouterr().out
