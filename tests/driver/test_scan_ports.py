"""``hilbot scan`` names the candidate serial ports when no port, or a missing one, is given.

There are no USB adapters on the test machine: the tests check the one line's format and
that it lists what pyserial's ``list_ports`` finds here (perhaps nothing).
"""

from __future__ import annotations

import pytest

from hilbot.driver.cli import main
from hilbot.driver.commands.failures import candidate_ports

FAMILIES = ["dynamixel", "feetech"]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def assert_names_the_candidates(line: str) -> None:
    found = candidate_ports()
    if found:
        assert f"serial ports here: {', '.join(found)};" in line
    else:
        assert "no serial port found: is the adapter plugged in and powered?" in line


@pytest.mark.parametrize("family", FAMILIES)
def test_no_port_lists_the_candidates(capsys, family):
    assert main(["scan", "--family", family]) == 2
    line = one_line(capsys)
    assert line.startswith("hilbot scan: no --port given")
    assert_names_the_candidates(line)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_missing_port_names_the_candidates_in_one_line(capsys, family):
    assert main(["scan", "--family", family, "--port", "/dev/hilbot-no-such-port"]) == 2
    line = one_line(capsys)
    assert line.startswith(
        "hilbot scan: cannot open the serial port /dev/hilbot-no-such-port (from --port): "
    )
    assert_names_the_candidates(line)
    assert line.endswith("give the right one with --port")
