"""hilbot scan, servo and doctor --backend virtual: a virtual bus of the named robot."""

from __future__ import annotations

import pytest

from hilbot.driver.cli import main


def _rows(out: str) -> list[list[str]]:
    """The table rows of a scan: lines that start with an id."""
    return [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]


def test_scan_a_virtual_koch_finds_its_six_servos(capsys):
    assert main(["scan", "koch_v1_1_follower", "--backend", "virtual"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("virtual bus main of koch_v1_1_follower: /dev/")
    rows = _rows(out)
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5", "6"]
    assert {r[1] for r in rows} == {"XL430-W250", "XL330-M288"}


def test_scan_a_virtual_so101_scans_it_the_feetech_way(capsys):
    assert main(["scan", "so101_follower", "--backend", "virtual", "--ids", "1-8"]) == 0
    out = capsys.readouterr().out
    assert "(Feetech, 1000000 bit/s, servos 1 2 3 4 5 6)" in out.splitlines()[0]
    assert [r[1] for r in _rows(out)] == ["STS3215/STS3215-12V"] * 6


def test_servo_changes_a_servo_of_a_virtual_bus(capsys):
    args = ["servo", "koch_v1_1_follower", "--backend", "virtual", "--id", "1", "--set-id", "7"]
    assert main([*args, "--return-delay", "0"]) == 0
    out = capsys.readouterr().out
    assert "servo 1 (XL430-W250) is now id 7" in out
    assert "it ends with this command" in out.splitlines()[0]


def test_servo_on_a_virtual_feetech_bus_takes_its_family_from_the_config(capsys):
    args = ["servo", "so101_follower", "--backend", "virtual", "--id", "2", "--set-id", "9"]
    assert main(args) == 0
    assert "servo 2 (STS3215) is now id 9" in capsys.readouterr().out


@pytest.mark.parametrize("robot", ["so101_follower", "openmanipulator_x"])
def test_doctor_checks_a_virtual_bus_of_the_robot(robot, capsys):
    assert main(["doctor", robot, "--backend", "virtual"]) == 0
    out = capsys.readouterr().out
    assert f"virtual bus main of {robot}" in out
    assert "[error]" not in out and "timing budget" in out


@pytest.mark.parametrize("command", ["scan", "servo", "doctor"])
def test_a_port_with_backend_virtual_is_refused_in_one_line(command, capsys):
    args = [command, "--backend", "virtual", "--port", "/dev/ttyUSB0", "--id", "1"]
    if command != "servo":
        args = args[:-2]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--port" in err and "--backend virtual" in err


@pytest.mark.parametrize("command", ["scan", "servo"])
def test_a_robot_name_without_backend_virtual_is_refused(command, capsys):
    args = [command, "koch_v1_1_follower", "--port", "/dev/ttyUSB0", "--id", "1"]
    if command == "scan":
        args = args[:-2]
    assert main(args) == 2
    assert "is for --backend virtual" in capsys.readouterr().err


def test_an_unknown_robot_names_the_shipped_ones(capsys):
    assert main(["scan", "no_such_arm", "--backend", "virtual"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shipped robots:" in err


@pytest.mark.parametrize(
    "command", ["run", "scan", "servo", "doctor", "calibrate", "lead", "bench"]
)
def test_every_command_of_the_setup_guide_has_a_virtual_backend(command, capsys):
    # docs/setup.md: "Every command has a --backend virtual form"
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--backend" in text and "virtual" in text.split("--backend", 1)[1]
