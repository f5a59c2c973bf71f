"""``hilbot sim-bus`` keeps its servos' EEPROM across restarts, forgets it on request,
starts its hand when asked, and plugs servos in one at a time; driven as a user does,
in a child process, with the vendor SDK on the port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import scservo_sdk as scs
from scservo_sdk import port_handler

from hilbot.sim.pty_server import STATE_DIR_ENV
from tests.driver.conftest import CliResult

FEETECH = ["--servo", "1:STS3215", "--servo", "2:STS3215", "--family", "feetech"]


@pytest.fixture(autouse=True)
def _patient_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 100)


@contextmanager
def sim_bus(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, list[str]]]:
    """A ``hilbot sim-bus`` child; yields its port and the lines it printed before it."""
    command = [sys.executable, "-m", "hilbot", "sim-bus", *args]
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("main: /dev/"), line + (
                process.stderr.read() if process.stderr else ""
            )
            yield line.split()[1], [line]
        finally:
            process.terminate()
            process.wait(timeout=30)


def _sdk(port: str) -> tuple[scs.PortHandler, object]:
    handler = scs.PortHandler(port)
    assert handler.openPort() and handler.setBaudRate(1_000_000)
    return handler, scs.PacketHandler(0)


def _read(port: str, servo: int, address: int) -> int:
    handler, ph = _sdk(port)
    try:
        for _ in range(5):  # a fresh process on a busy machine may miss a deadline
            value, result, _ = ph.read2ByteTxRx(handler, servo, address)  # type: ignore[attr-defined]
            if result == scs.COMM_SUCCESS:
                return int(value)
        raise AssertionError(f"servo {servo} did not answer")
    finally:
        handler.closePort()


def _write(port: str, servo: int, address: int, value: int) -> None:
    handler, ph = _sdk(port)
    try:
        for _ in range(5):
            if ph.write2ByteTxRx(handler, servo, address, value)[0] == scs.COMM_SUCCESS:  # type: ignore[attr-defined]
                return
        raise AssertionError(f"servo {servo} did not take the write")
    finally:
        handler.closePort()


def test_eeprom_is_kept_in_the_state_folder_until_a_factory_reset(tmp_path: Path) -> None:
    env = {STATE_DIR_ENV: str(tmp_path / "state")}
    with sim_bus(*FEETECH, env=env) as (port, _):
        _write(port, 2, 31, 250)  # Homing Offset
        assert _read(port, 2, 31) == 250
    files = list((tmp_path / "state").glob("*.json"))
    assert [f.name for f in files] == ["servos-feetech-1-STS3215_2-STS3215.json"]
    with sim_bus(*FEETECH, env=env) as (port, _):
        assert _read(port, 2, 31) == 250
    with sim_bus(*FEETECH, "--factory-reset", env=env) as (port, _):
        assert _read(port, 2, 31) == 0
    with sim_bus(*FEETECH, "--no-persist", env=env) as (port, _):
        _write(port, 2, 31, 100)
    with sim_bus(*FEETECH, env=env) as (port, _):
        assert _read(port, 2, 31) == 0


def test_an_explicit_eeprom_file_and_bad_options_are_one_line(
    tmp_path: Path, hilbot_main: Callable[..., CliResult]
) -> None:
    state = tmp_path / "mine.json"
    with sim_bus(*FEETECH, "--eeprom-file", str(state)) as (port, _):
        _write(port, 1, 11, 3000)  # Max Angle Limit
    assert state.exists()
    for extra, message in (
        (["--hand-start", "soon"], "--hand-start 'soon'"),
        (["--plug-in-one-at-a-time", "--hand", "sweep"], "--hand"),
    ):
        done = hilbot_main("sim-bus", *FEETECH, *extra)  # refused before a bus starts
        assert done.returncode == 2
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_plug_in_one_at_a_time_on_the_command_line(tmp_path: Path) -> None:
    """Servo 2 (plugged first) is found alone at id 1 and given id 2; Enter plugs in the
    next, which is also at id 1; Enter again connects both."""
    with subprocess.Popen(
        [sys.executable, "-m", "hilbot", "sim-bus", *FEETECH, "--plug-in-one-at-a-time",
         "--eeprom-file", str(tmp_path / "arm.json")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as process:  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        try:
            port = process.stdout.readline().split()[1]
            lines = [process.stdout.readline() for _ in range(2)]
            assert "EEPROM:" in lines[0] and "plugged in: servo 2 (1 of 2)" in lines[1]
            handler, ph = _sdk(port)
            try:
                assert ph.ping(handler, 2)[1] != scs.COMM_SUCCESS  # type: ignore[attr-defined]
                assert ph.ping(handler, 1)[:2] == (777, scs.COMM_SUCCESS)  # type: ignore[attr-defined]
                ph.write1ByteTxRx(handler, 1, 5, 2)  # type: ignore[attr-defined]
                assert ph.write1ByteTxRx(handler, 2, 6, 0)[0] == scs.COMM_SUCCESS  # type: ignore[attr-defined]
                assert "servo 2 is set up: id 2" in process.stdout.readline()
                process.stdin.write("\n")
                process.stdin.flush()
                assert "plugged in: servo 1 (2 of 2)" in process.stdout.readline()
                assert ph.ping(handler, 2)[1] != scs.COMM_SUCCESS  # type: ignore[attr-defined]
                assert ph.ping(handler, 1)[:2] == (777, scs.COMM_SUCCESS)  # type: ignore[attr-defined]
                process.stdin.write("\n")
                process.stdin.flush()
                assert "every servo is connected" in process.stdout.readline()
                deadline = time.monotonic() + 10
                while ph.ping(handler, 2)[1] != scs.COMM_SUCCESS:  # type: ignore[attr-defined]
                    assert time.monotonic() < deadline
            finally:
                handler.closePort()
        finally:
            process.terminate()
            process.wait(timeout=30)
