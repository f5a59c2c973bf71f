"""hilbot lead and hilbot calibrate tell expected errors as every command does (describe).

The commands run in this process (``hilbot_main``): what they say is the point.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.driver.conftest import CliResult
from tests.driver.test_cli_errors import one_line as _line


def test_lead_and_calibrate_say_bad_config_as_run_does(
    hilbot_main: Callable[..., CliResult],
) -> None:
    for command, args in (("lead", ["koch_v1_1_leader", "--to", "nosuch"]), ("calibrate", [])):
        result = hilbot_main(command, *(args or ["nosuch"]))
        line = _line(result, command)
        assert result.returncode == 2
        assert line.startswith(f"hilbot {command}: bad config: "), line
        assert "no shipped robot of that name" in line


def test_calibrate_on_a_missing_port_says_which_ports_there_are(
    tmp_path: Path, hilbot_main: Callable[..., CliResult]
) -> None:
    port = str(tmp_path / "ttyUSB-not-there")
    result = hilbot_main("calibrate", "koch_v1_1_follower", "--port", port, "--yes")
    line = _line(result, "calibrate")
    assert result.returncode == 1  # as before: the flow started, then failed
    assert f"cannot open the serial port {port}: No such file or directory" in line
    assert "serial ports here:" in line or "no serial port found" in line
    assert "[Errno" not in line  # the SDK's repetitions are gone
