"""Feetech servos found without ``--family feetech``: named, with the flag to add."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hilbot.driver.cli import main
from hilbot.sim.virtual_bus import FeetechVirtualBus

MARGIN = ["--margin-ms", "50"]  # the loaded test machine: generous reply slack


@pytest.fixture
def vbus() -> Iterator[FeetechVirtualBus]:
    with FeetechVirtualBus({1: "STS3215", 3: "STS3250"}, 1_000_000, return_delay_time=0) as bus:
        yield bus


def test_a_dynamixel_scan_names_feetech_servos_and_the_flag(vbus, capsys):
    args = ["scan", "--port", vbus.port, "--baud", "1000000", "--ids", "1-4", *MARGIN]
    assert main(args) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()[1:3]]
    assert rows[0][:3] == ["1", "STS3215/STS3215-12V", "777"]
    assert rows[1][:3] == ["3", "STS3250", "2825"]
    assert rows[0][-1] == rows[1][-1] == "Feetech"
    assert "unknown" not in out
    assert "id 1, 3 are Feetech servos" in out
    assert "--family feetech" in out.splitlines()[3]


def test_a_dynamixel_scan_of_the_default_protocols_finds_them_too(vbus, capsys):
    # no --protocol: 2.0's broadcast ping finds nothing, 1.0's ping per id finds both
    args = ["scan", "--port", vbus.port, "--baud", "1000000", "--ids", "1-3", *MARGIN]
    assert main(args) == 0
    assert "add --family feetech" in capsys.readouterr().out


def test_servo_without_the_family_says_to_add_it(vbus, capsys):
    assert main(["servo", "--port", vbus.port, "--id", "3", "--set-id", "4"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "a Feetech STS3250 answers at id 3: add --family feetech" in err
    assert vbus.servo(3) is not None  # nothing changed


def test_servo_of_a_missing_id_still_points_to_scan(vbus, capsys):
    assert main(["servo", "--port", vbus.port, "--id", "9", "--set-id", "4"]) == 1
    assert "`hilbot scan` finds it" in capsys.readouterr().err


def test_an_unknown_dynamixel_that_spells_a_feetech_number_is_not_taken_for_one(capsys):
    from hilbot.hal.dynamixel.tables import RegisterName as N
    from hilbot.sim import running_virtual_bus

    with running_virtual_bus({9: "AX-12A"}, protocol=1, return_delay_time=0) as vbus:
        memory = vbus.servo(9).memory
        memory.set(N.MODEL_NUMBER, 4242)  # a model hilbot does not know
        memory.set(N.BAUD_RATE, 3)  # 500000 bit/s; bytes 3..4 now [9, 3] = 777, an STS3215's
        args = ["scan", "--port", vbus.port, "--baud", "500000", "--protocol", "1"]
        assert main([*args, "--ids", "8-10", *MARGIN]) == 0
    out = capsys.readouterr().out
    assert "unknown (4242)" in out and "Feetech" not in out


def test_servo_does_not_take_a_protocol1_dynamixel_for_a_feetech(capsys):
    from hilbot.sim import running_virtual_bus

    # an AX-12A answers a Feetech ping (the same framing), but is no Feetech servo
    with running_virtual_bus({1: "AX-12A"}, protocol=1, return_delay_time=0) as vbus:
        assert main(["servo", "--port", vbus.port, "--id", "1", "--set-id", "4"]) == 1
    err = capsys.readouterr().err
    assert "Feetech" not in err and "`hilbot scan` finds it" in err
