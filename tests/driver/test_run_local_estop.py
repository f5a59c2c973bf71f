"""`hilbot run`'s local e-stop, never through MQTT: SIGUSR1, and a key in its terminal (a pty).

The run drives the virtual bus through the real Dynamixel backend, in a separate
process, with a looping trajectory, so "the robot holds" is read off the servos' Goal
Position registers.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.sim.testing import running_virtual_bus

IDS = range(11, 16)  # the OpenManipulator-X's servos
WAIT = 60.0  # [s] generous: start-up imports and the bus check on a busy machine
SWING = {"loop": True, "waypoints": [{"t": 0.0, "joints": {"joint1": 0.0}},
                                     {"t": 0.5, "joints": {"joint1": 0.4}},
                                     {"t": 1.0, "joints": {"joint1": 0.0}}]}  # fmt: skip


def wait_for(condition: Callable[[], bool], what: str, alive: Callable[[], bool], log) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if not alive():
            pytest.fail(f"hilbot run exited before {what}: {log()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {WAIT} s: {log()}")
        time.sleep(0.02)


def goal_is_steady(vbus, servo_id: int, period: float) -> bool:
    """Whether the goal stays put for 20 cycles (it moves every cycle while tracking)."""
    first = vbus.register(servo_id, RegisterName.GOAL_POSITION)
    time.sleep(20 * period)
    return vbus.register(servo_id, RegisterName.GOAL_POSITION) == first


def run_args(path: Path, traj: Path) -> list[str]:
    return [
        sys.executable, "-m", "hilbot", "-v", "run", str(path), "--backend", "dynamixel",
        "--enable", "--no-mqtt", "--trajectory", str(traj), "--duration", "600",
    ]  # fmt: skip


@pytest.fixture
def robot(make_config, config_data_of, tmp_path):
    """``(vbus, args)``: a virtual bus and the command line of a run that swings joint1."""
    config = make_config("openmanipulator_x")
    data = config_data_of("openmanipulator_x")
    traj = tmp_path / "swing.yaml"
    traj.write_text(yaml.safe_dump(SWING))
    with running_virtual_bus(
        config.servo_specs(), initial_positions=dict(config.home), return_delay_time=0
    ) as vbus:
        data["buses"][0]["port"] = vbus.port
        path = tmp_path / "robot.yaml"
        path.write_text(yaml.safe_dump(data))
        yield vbus, run_args(path, traj), 1.0 / config.rate_hz


def test_sigusr1_e_stops_and_the_robot_holds_until_shutdown(robot, tmp_path):
    vbus, args, period = robot
    log = tmp_path / "stderr.txt"
    with log.open("wb") as err:
        proc = subprocess.Popen([*args, "--no-status"], stdout=subprocess.PIPE, stderr=err)
        try:
            alive = lambda: proc.poll() is None  # noqa: E731
            torque = lambda: all(  # noqa: E731
                vbus.register(i, RegisterName.TORQUE_ENABLE) == 1 for i in IDS
            )
            wait_for(torque, "torque on", alive, log.read_text)
            wait_for(lambda: not goal_is_steady(vbus, 11, period), "motion", alive, log.read_text)
            proc.send_signal(signal.SIGUSR1)
            said = "local e-stop (SIGUSR1): e-stopped"
            wait_for(lambda: said in log.read_text(), "the e-stop", alive, log.read_text)
            assert "command estop done; mode estopped" in log.read_text()
            assert torque(), "estop_action hold keeps torque on"
            assert goal_is_steady(vbus, 11, period), "the robot must hold"
            assert proc.poll() is None, "an e-stop latches; it does not end the run"
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, log.read_text()
    assert all(vbus.register(i, RegisterName.TORQUE_ENABLE) == 0 for i in IDS)
    text = out.decode()
    assert "shutdown: torque off on 5 servos" in text
    assert text.splitlines()[-1].startswith("estopped")  # the final status: still latched


class Terminal:
    """``hilbot run`` in a pseudo-terminal of its own (its controlling tty, as at a shell)."""

    def __init__(self, args: list[str]) -> None:
        pid, fd = os.forkpty()
        if pid == 0:  # the child: stdin, stdout and stderr are the pty
            try:
                os.execv(sys.executable, args)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.screen = b""
        self.status: int | None = None

    def read(self) -> str:
        while select.select([self.fd], [], [], 0)[0]:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the child closed its side
                break
            if not chunk:
                break
            self.screen += chunk
        return self.screen.decode(errors="replace")

    def alive(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status is None

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def lflag(self) -> int:
        return termios.tcgetattr(self.fd)[3]

    def wait(self) -> int:
        deadline = time.monotonic() + WAIT
        while self.alive():
            self.read()
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                pytest.fail(f"hilbot run did not stop: {self.read()}")
            time.sleep(0.02)
        self.read()
        assert self.status is not None
        return self.status

    def close(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def visible_lines(screen: str) -> list[str]:
    """What a terminal shows of each line: the text after its last carriage return."""
    lines = screen.replace("\r\n", "\n").split("\n")  # the pty turns \n into \r\n
    return [line.rsplit("\r", 1)[-1].replace("\x1b[K", "") for line in lines]


def test_a_key_in_the_terminal_e_stops_and_ctrl_c_says_what_the_shutdown_did(robot):
    vbus, args, period = robot
    term = Terminal(args)
    try:
        wait_for(lambda: "local e-stop: space or e" in term.read(), "the hint", term.alive,
                 term.read)  # fmt: skip
        assert not term.lflag() & (termios.ICANON | termios.ECHO), "keys come one by one"
        wait_for(lambda: not goal_is_steady(vbus, 11, period), "motion", term.alive, term.read)
        term.type(b" ")
        said = "local e-stop (key space): e-stopped"
        wait_for(lambda: said in term.read(), "the e-stop", term.alive, term.read)
        assert goal_is_steady(vbus, 11, period), "the robot must hold"
        wait_for(lambda: "estopped" in term.read().rsplit(said, 1)[-1], "the status line",
                 term.alive, term.read)  # fmt: skip
        term.type(b"\x03")  # Ctrl+C: the terminal sends SIGINT, cbreak keeps that
        assert term.wait() == 0, term.read()
        flags = term.lflag()
    finally:
        term.close()
    assert flags & termios.ICANON and flags & termios.ECHO, "the terminal is restored"
    screen = term.screen.decode(errors="replace")
    assert "shutdown: torque off on 5 servos" in screen
    assert all(vbus.register(i, RegisterName.TORQUE_ENABLE) == 0 for i in IDS)
    # The status line never runs into a log line: each record starts on a cleared line.
    lines = visible_lines(screen)
    records = [line for line in lines if " INFO " in line or " WARNING " in line]
    assert records and any(said in line for line in records)
    assert not [line for line in records if "Hz" in line and "late p50" in line], lines


def test_the_local_stop_imports_and_runs_without_termios(tmp_path):
    # As on Windows: no termios or tty module. Keys are off; nothing fails.
    code = """
import asyncio, sys
sys.modules["termios"] = None
sys.modules["tty"] = None
from hilbot.driver.commands.local_stop import LocalStop

class Runtime:
    async def command(self, cmd):
        pass

async def main():
    async with LocalStop(Runtime(), stdin=sys.stdin) as stop:
        print("keys", stop.keys_active)

asyncio.run(main())
"""
    controller, terminal = os.openpty()  # a terminal, so only the missing modules stop keys
    try:
        result = subprocess.run(
            [sys.executable, "-c", code], stdin=terminal, capture_output=True, text=True,
            timeout=WAIT,
        )  # fmt: skip
    finally:
        os.close(terminal)
        os.close(controller)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "keys False"
