"""The ``hilbot`` command line: expected errors are one line, no traceback.

Most run the CLI's ``main`` in this process (``hilbot_main``: what a command says and
returns needs no interpreter start); a few run the real command in a subprocess, where the
process is the point: its own logging set-up, the exit code it returns to the shell, and
a child bus to end.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from hilbot._compat import ExceptionGroup
from hilbot.driver.commands.failures import describe, port_problem
from hilbot.driver.runtime.config import load_config
from hilbot.sim import running_virtual_bus
from tests.driver.conftest import CliResult

WAIT = 120.0  # [s] start-up imports on a busy machine; the commands themselves end at once


def hilbot(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hilbot ARGS`` and return what it printed."""
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=WAIT,
        stdin=subprocess.DEVNULL,
    )


def one_line(result: subprocess.CompletedProcess[str] | CliResult, command: str) -> str:
    """The single stderr line of a refused command (and assert it is one, with no traceback)."""
    err = result.stderr
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"hilbot {command}: "), err
    return lines[0]


def missing_port(tmp_path) -> str:
    return str(tmp_path / "ttyUSB-not-there")


@pytest.mark.parametrize("name", ["hardware", "dynamixel"])  # dynamixel: the old name
def test_a_missing_port_from_the_command_line_says_so_and_lists_the_ports(name, tmp_path):
    port = missing_port(tmp_path)
    result = hilbot("run", "--backend", name, "--port", port, "--no-mqtt")
    line = one_line(result, "run")
    assert result.returncode == 2
    assert f"cannot open the serial port {port} (from --port): No such file or directory" in line
    assert "serial ports here:" in line or "no serial port found" in line
    assert "--port" in line and "hilbot scan" in line


def test_a_missing_port_from_the_config_names_the_field(
    tmp_path, config_data_of, write_yaml, hilbot_main
):
    data = config_data_of("openmanipulator_x")
    data["buses"][0]["port"] = port = missing_port(tmp_path)
    path = write_yaml(data)
    result = hilbot_main("run", str(path), "--backend", "hardware", "--no-mqtt")
    line = one_line(result, "run")
    assert result.returncode == 2
    assert f"{port} (from buses[0].port of the config {path})" in line


@pytest.mark.parametrize("backend", ["sim", "virtual"])
def test_port_with_a_backend_that_opens_none_is_refused(backend, tmp_path, hilbot_main):
    result = hilbot_main("run", "--backend", backend, "--port", missing_port(tmp_path), "--no-mqtt")
    line = one_line(result, "run")
    assert result.returncode == 2
    assert f"--port is for --backend hardware; the {backend} backend" in line


def test_virtual_return_delay_outside_the_virtual_backend_is_refused(hilbot_main):
    result = hilbot_main("run", "--virtual-return-delay", "250", "--no-mqtt")
    assert result.returncode == 2
    assert "--virtual-return-delay is for --backend virtual" in one_line(result, "run")


@pytest.mark.parametrize(
    ("option", "value"),
    [("--duration", "-1"), ("--duration", "0"), ("--duration", "inf"), ("--rate", "0")],
)
def test_duration_and_rate_must_be_positive(option, value, hilbot_main):
    result = hilbot_main("run", "--no-mqtt", option, value)
    line = one_line(result, "run")
    assert result.returncode == 2
    assert f"argument {option}: must be a finite number above 0" in line


def test_a_rate_beyond_the_sane_range_is_refused_with_the_field(hilbot_main):
    result = hilbot_main("run", "--no-mqtt", "--rate", "1e9", "--duration", "0.1")
    line = one_line(result, "run")
    assert result.returncode == 2
    assert "rate_hz: --rate 1e+09" in line and "less than or equal to 2000" in line


def test_stats_into_a_folder_that_does_not_exist_is_refused_before_the_run(tmp_path, hilbot_main):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = hilbot_main("run", "--no-mqtt", "--duration", "5", "--stats", str(blocker / "s.json"))
    assert result.returncode == 2
    assert "--stats" in one_line(result, "run") and "does not exist" in result.stderr


def test_a_bad_option_is_one_line_pointing_to_help():
    result = hilbot("run", "--backend", "mujoco-nope")
    line = one_line(result, "run")
    assert result.returncode == 2 and "invalid choice" in line and "--help" in line
    result = hilbot("run", "--bogus")
    line = one_line(result, "run")
    assert result.returncode == 2
    assert line == "hilbot run: unrecognized arguments: --bogus (see hilbot run --help)"


def test_doctor_with_a_config_uses_the_port_given(config_data_of, hilbot_main):
    # The config names /dev/ttyUSB0; --port sends the check to the virtual bus instead.
    config = load_config("openmanipulator_x")
    with running_virtual_bus(config.servo_specs(), return_delay_time=0) as vbus:
        port = vbus.port
        # A wide reply deadline: the virtual servos share this busy machine's CPUs.
        result = hilbot_main("doctor", "openmanipulator_x", "--port", port, "--margin-ms", "100")
    assert "Traceback" not in result.stderr, result.stderr
    assert f"== {port}: 1000000 bit/s, protocol 2.0, 5 servos" in result.stdout, result.stdout
    assert "/dev/ttyUSB0" not in result.stdout and "cannot open" not in result.stdout
    assert "servo 11 (joint1): XM430-W350" in result.stdout, result.stdout  # they answered


def test_doctor_refuses_bus_options_that_a_config_overrides(hilbot_main):
    result = hilbot_main("doctor", "openmanipulator_x", "--baud", "57600")
    assert result.returncode == 2
    assert "--baud" in one_line(result, "doctor")


def test_doctor_port_on_a_multi_bus_robot_is_refused(tmp_path, hilbot_main):
    result = hilbot_main("doctor", "bimanual", "--port", missing_port(tmp_path))
    assert result.returncode == 2
    assert "single-bus" in one_line(result, "doctor")


def test_expected_errors_inside_a_task_group_are_described_by_their_first_leaf():
    from hilbot.driver.runtime.errors import ConfigError
    from hilbot.hal.errors import PortError

    group = ExceptionGroup("tasks", [PortError("cannot open /dev/x", port="/dev/x")])
    failure = describe(group)
    assert failure is not None and failure.exit_code == 2
    assert failure.message.startswith("cannot open the serial port /dev/x")
    config = describe(ConfigError(None, ("rate_hz",), "too fast"))
    assert config == ("bad config: rate_hz: too fast", 2)
    assert describe(ExceptionGroup("tasks", [ZeroDivisionError()])) is None  # a bug


def test_port_problem_lists_candidates_or_says_none_were_found():
    text = port_problem("/dev/ttyUSB7", "No such file or directory", "--port")
    assert text.startswith("cannot open the serial port /dev/ttyUSB7 (from --port)")
    assert "serial ports here:" in text or "no serial port found" in text


def test_bench_refuses_port_without_the_dynamixel_backend_and_a_bad_rate(tmp_path, hilbot_main):
    args = ["bench", "openmanipulator_x", "--scenario", "openmanipulator_circle"]
    result = hilbot_main(*args, "--port", missing_port(tmp_path))
    assert result.returncode == 2
    assert "--port is for the hardware backend" in one_line(result, "bench")
    result = hilbot_main(*args, "--rate", "-3")
    assert result.returncode == 2
    assert "argument --rate: must be a finite number above 0" in one_line(result, "bench")


def test_lead_to_a_broker_that_is_not_there_is_one_line():
    # a real refused TCP connection (nothing listens on port 1), not a patched client
    result = hilbot(
        "lead", "koch_v1_1_leader", "--backend", "virtual", "--demo", "wave",
        "--mqtt", "mqtt://127.0.0.1:1",
    )  # fmt: skip
    line = one_line(result, "lead")
    assert result.returncode == 1
    assert "MQTT broker:" in line and "refused" in line.lower()


def test_a_mount_naming_no_servo_of_the_bus_is_refused(hilbot_main):
    # Silently dropping it would calibrate against an arm assembled as the user did not ask.
    result = hilbot_main("sim-bus", "openmanipulator_x", "--mount", "9:10", "--duration", "1")
    line = one_line(result, "sim-bus")
    assert result.returncode == 2
    assert "--mount '9:10': no servo 9 on the bus (ids 11, 12, 13, 14, 15)" in line


def test_calibrate_demo_refuses_a_mount_naming_no_servo(hilbot_main):
    result = hilbot_main(
        "calibrate", "openmanipulator_x", "--demo", "--backend", "virtual", "--mount", "9:10"
    )
    line = one_line(result, "calibrate")
    assert result.returncode == 2
    assert "no servo 9 on the bus (ids 11, 12, 13, 14, 15)" in line


def test_an_unreadable_config_file_is_named_without_a_field(tmp_path, hilbot_main):
    path = tmp_path / "omx.yaml"
    result = hilbot_main("run", str(path), "--no-mqtt")
    line = one_line(result, "run")
    assert line.endswith(f" {path}: cannot read the config: No such file or directory")
    assert "<root>" not in line
