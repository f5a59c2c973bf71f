"""hilbot scan / servo / doctor against the virtual bus."""

import pytest

from hilbot.driver.cli import main
from hilbot.hal.dynamixel.tables import RegisterName as N


def test_scan_finds_protocol2_servos_at_their_baud_rate(open_bus, capsys):
    vbus = open_bus({1: "XM430-W350", 4: "XL430-W250"})
    assert (
        main(
            [
                "scan",
                "--port",
                vbus.port,
                "--baud",
                "57600,1000000",
                "--protocol",
                "2",
                "--margin-ms",
                "50",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines()[1:] if line.strip()]
    assert len(lines) == 2
    assert lines[0].split()[:3] == ["1", "XM430-W350", "1020"]
    assert lines[1].split()[:3] == ["4", "XL430-W250", "1060"]
    assert all("1000000" in line for line in lines)


def test_scan_finds_each_servo_at_the_baud_rate_it_listens_at(open_bus, capsys):
    vbus = open_bus({1: "XM430-W350", 4: "XL430-W250"})
    vbus.servo(4).memory.set(N.BAUD_RATE, 1)  # 57 600 bit/s (X series value 1)
    args = ["scan", "--port", vbus.port, "--baud", "57600,1000000", "--protocol", "2"]
    assert main([*args, "--margin-ms", "50"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()[1:] if line.strip()]
    # id, model, model number, firmware, baud rate, protocol; in the order found
    assert lines == [
        ["4", "XL430-W250", "1060", "45", "57600", "2.0"],
        ["1", "XM430-W350", "1020", "45", "1000000", "2.0"],
    ]


def test_scan_protocol1_by_pinging_ids(open_bus, capsys):
    vbus = open_bus({3: "AX-12A"}, protocol=1)
    assert (
        main(
            [
                "scan",
                "--port",
                vbus.port,
                "--baud",
                "1000000",
                "--protocol",
                "1",
                "--ids",
                "1-5",
                "--margin-ms",
                "50",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "AX-12A" in out
    assert out.splitlines()[1].split()[0] == "3"


def test_scan_nothing_and_bad_port(open_bus, capsys):
    vbus = open_bus({1: "XM430-W350"})
    assert main(["scan", "--port", vbus.port, "--baud", "57600", "--protocol", "2"]) == 1
    assert main(["scan", "--port", "/dev/nonexistent-hilbot", "--protocol", "2"]) == 2
    err = capsys.readouterr().err
    assert "cannot open the serial port /dev/nonexistent-hilbot (from --port)" in err
    assert "serial ports here:" in err or "no serial port found" in err


def test_scan_rejects_bad_baud_list(capsys):
    with pytest.raises(SystemExit):
        main(["scan", "--port", "x", "--baud", "fast"])
    assert "comma-separated" in capsys.readouterr().err


def test_servo_changes_id_then_baud_rate(open_bus, capsys):
    vbus = open_bus({1: "XM430-W350", 2: "XM430-W350"})
    assert main(["servo", "--port", vbus.port, "--id", "1", "--set-id", "2"]) == 1
    assert "already taken" in capsys.readouterr().err
    assert (
        main(["servo", "--port", vbus.port, "--id", "1", "--set-id", "7", "--return-delay", "0"])
        == 0
    )
    assert vbus.servo(7).memory.get(N.ID) == 7
    assert main(["servo", "--port", vbus.port, "--id", "7", "--set-baud", "2000000"]) == 0
    assert vbus.servo(7).baudrate == 2_000_000
    assert "2000000 bit/s" in capsys.readouterr().out


def test_servo_refuses_a_rate_the_model_lacks(open_bus, capsys):
    vbus = open_bus({1: "XL330-M288"})
    assert main(["servo", "--port", vbus.port, "--id", "1", "--set-baud", "4500000"]) == 1
    assert "supports" in capsys.readouterr().err


def test_servo_missing(open_bus, capsys):
    vbus = open_bus({1: "XM430-W350"})
    assert main(["servo", "--port", vbus.port, "--id", "9", "--set-id", "3"]) == 1
    assert "does not answer" in capsys.readouterr().err


def test_doctor_prints_findings_and_budget(open_bus, capsys):
    vbus = open_bus({1: "XM430-W350", 2: "XM430-W350"}, return_delay_time=250)
    args = ["doctor", "--port", vbus.port, "--servo", "1:XM430-W350", "--servo", "2:XM430-W350"]
    assert main([*args, "--margin-ms", "50"]) == 0
    out = capsys.readouterr().out
    assert "--return-delay 0" in out
    assert "position limits 0..4095" in out
    assert "timing budget" in out
    # fast sync read of current, velocity and position (10 B at 126) from 2 servos:
    # out 14 + 2 = 16 B and the 14 + 2 x 5 = 24 B sync write; back 8 + 2 x (10 + 4) = 36 B;
    # 76 B at 10 µs plus one 500 µs return delay (a fast read has one) = 1260 µs
    assert "fast sync read of 10 B + sync write of 4 B" in out
    assert "76 B x 10 bit = 760 µs, return delays 500 µs" in out
    assert "cycle 1260 µs -> at most 794 Hz" in out


def test_doctor_flags_a_wrong_model(open_bus, capsys):
    vbus = open_bus({1: "XL430-W250"})
    assert (
        main(["doctor", "--port", vbus.port, "--servo", "1:XM430-W350", "--margin-ms", "50"]) == 1
    )
    assert "is a XL430-W250" in capsys.readouterr().out


def test_doctor_needs_a_config_or_servos(capsys):
    assert main(["doctor"]) == 2
    assert "--servo" in capsys.readouterr().err


def test_doctor_reads_a_robot_config(open_bus, tmp_path, capsys):
    import shutil
    from pathlib import Path

    from hilbot.driver.runtime.config import load_config

    robots = Path(__file__).resolve().parents[2] / "configs" / "robots"
    servos = load_config(robots / "widowx_250s.yaml").servo_specs("main")
    vbus = open_bus(servos)
    text = (robots / "widowx_250s.yaml").read_text().replace("/dev/ttyDXL", vbus.port)
    (tmp_path / "robot.yaml").write_text(text)
    shutil.copy(robots / "widowx_250s.urdf", tmp_path)
    assert main(["doctor", str(tmp_path / "robot.yaml"), "--margin-ms", "50"]) == 0
    out = capsys.readouterr().out
    assert "9 servos" in out
    assert "servo 3 (shoulder): XM430-W350" in out
    assert "servo 9 (gripper): XL430-W250" in out
    assert "fast sync read" in out


def test_doctor_warns_about_a_slow_usb_latency_timer(open_bus, monkeypatch):
    from hilbot.hal.dynamixel import tools
    from hilbot.hal.mapping import BusSpec, ServoSpec

    vbus = open_bus({1: "XM430-W350"})
    monkeypatch.setattr(tools, "latency_timer_ms", lambda port: 16)  # an FTDI at its default
    findings, budget = tools.diagnose(
        BusSpec(vbus.port), [ServoSpec(1, "XM430-W350", "a")], margin_ms=50
    )
    latency = findings[0]
    assert latency.level is tools.Level.WARN
    assert "latency_timer" in latency.message
    assert "16 ms USB latency" in budget


def test_servo_on_protocol1(open_bus, capsys):
    vbus = open_bus({1: "AX-12A"}, protocol=1)
    args = ["servo", "--port", vbus.port, "--protocol", "1", "--id", "1", "--set-id", "4"]
    assert main(args) == 0
    assert vbus.servo(4).memory.get(N.ID) == 4
    assert "now id 4" in capsys.readouterr().out
