"""`hilbot run`'s local e-stop, never through MQTT: SIGUSR1, and a key in its terminal (a pty).

The run drives the virtual bus (its own process) through the real Dynamixel backend,
with a looping trajectory and ``--record``, so "the robot holds" is read off the
commands the runtime wrote, cycle by cycle.
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

import numpy as np
import pytest
import yaml

from hilbot.driver.bench.recording import Recording

WAIT = 60.0  # [s] generous: start-up imports and the bus check on a busy machine
SWING = {"loop": True, "waypoints": [{"t": 0.0, "joints": {"joint1": 0.0}},
                                     {"t": 0.5, "joints": {"joint1": 0.4}},
                                     {"t": 1.0, "joints": {"joint1": 0.0}}]}  # fmt: skip
STARTED = "command enable done"
MOVING_S = 1.0  # [s] of the swing before the e-stop: it moves joint1 all along


def wait_for(condition: Callable[[], bool], what: str, alive: Callable[[], bool], log) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if not alive():
            pytest.fail(f"hilbot run exited before {what}: {log()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {WAIT} s: {log()}")
        time.sleep(0.02)


def assert_held_after_the_estop(recording: Path) -> None:
    """joint1 moved before the e-stop; from the e-stop on every command is the same."""
    rec = Recording.load(recording)
    estopped = rec.header.modes.index("estopped")
    mode = rec.channels["mode"]
    first = int(np.argmax(mode == estopped))
    assert mode[first] == estopped, "the run never e-stopped"
    assert (mode[first:] == estopped).all(), "the e-stop latched until the end"
    joint1 = rec.channels["q_command"][:, rec.header.joint_names.index("joint1")]
    assert np.ptp(joint1[:first]) > 0.05, "joint1 swung before the e-stop"
    # A controlled stop from the command (at most 0.4 s at the 50 Hz of this run), then
    # the command is the pose it came to rest at, unchanged to the end.
    after = rec.channels["q_command"][first:]
    moving = np.flatnonzero(np.any(np.diff(after, axis=0) != 0.0, axis=1))
    rest = int(moving[-1]) + 1 if moving.size else 0
    assert rest <= 0.4 * 50, f"still moving {rest} cycles after the e-stop"
    assert len(after) - rest > 10, "the robot holds one pose"


@pytest.fixture
def run_args(tmp_path: Path) -> tuple[list[str], Path]:
    """The command line of a run that swings joint1, and its recording file."""
    traj = tmp_path / "swing.yaml"
    traj.write_text(yaml.safe_dump(SWING))
    recording = tmp_path / "run.npz"
    args = [
        sys.executable, "-m", "hilbot", "-v", "run", "--backend", "virtual", "--rate", "50",
        "--enable", "--no-mqtt", "--trajectory", str(traj), "--duration", "600",
        "--record", str(recording),
    ]  # fmt: skip
    return args, recording


def test_sigusr1_e_stops_and_the_robot_holds_until_shutdown(run_args, tmp_path):
    args, recording = run_args
    log = tmp_path / "stderr.txt"
    with log.open("wb") as err:
        proc = subprocess.Popen([*args, "--no-status"], stdout=subprocess.PIPE, stderr=err)
        try:
            alive = lambda: proc.poll() is None  # noqa: E731
            wait_for(lambda: STARTED in log.read_text(), "enable", alive, log.read_text)
            time.sleep(MOVING_S)
            proc.send_signal(signal.SIGUSR1)
            said = "local e-stop (SIGUSR1): e-stopped"
            wait_for(lambda: said in log.read_text(), "the e-stop", alive, log.read_text)
            assert "command estop done; mode estopped" in log.read_text()
            time.sleep(MOVING_S)  # held for a while
            assert proc.poll() is None, "an e-stop latches; it does not end the run"
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, log.read_text()
    text = out.decode()
    assert "shutdown: torque off on 5 servos" in text
    assert text.splitlines()[-1].startswith("estopped")  # the final status: still latched
    assert_held_after_the_estop(recording)


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


def test_a_key_in_the_terminal_e_stops_and_ctrl_c_says_what_the_shutdown_did(run_args):
    args, recording = run_args
    term = Terminal(args)
    try:
        wait_for(lambda: STARTED in term.read(), "enable", term.alive, term.read)
        assert "local e-stop: space or e" in term.read()
        assert not term.lflag() & (termios.ICANON | termios.ECHO), "keys come one by one"
        time.sleep(MOVING_S)
        term.type(b" ")
        said = "local e-stop (key space): e-stopped"
        wait_for(lambda: said in term.read(), "the e-stop", term.alive, term.read)
        wait_for(lambda: "estopped" in term.read().rsplit(said, 1)[-1], "the status line",
                 term.alive, term.read)  # fmt: skip
        time.sleep(MOVING_S)  # held for a while
        term.type(b"\x03")  # Ctrl+C: the terminal sends SIGINT, cbreak keeps that
        assert term.wait() == 130, term.read()  # Ctrl+C exits 130, as lead and bench
        flags = term.lflag()
    finally:
        term.close()
    assert flags & termios.ICANON and flags & termios.ECHO, "the terminal is restored"
    screen = term.screen.decode(errors="replace")
    assert "shutdown: torque off on 5 servos" in screen
    assert_held_after_the_estop(recording)
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
