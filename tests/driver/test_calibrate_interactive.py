"""hilbot calibrate at a terminal: a person answers its prompts, the hand moves the arm.

The real command runs as a child process on a pseudo-terminal (its controlling terminal,
so Ctrl-C there is a SIGINT as at a shell), against a virtual bus in this process whose
servos were assembled with known errors. The test types what a person would and, between
the keys, the scripted hand moves the arm the way the prompt asks.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.calibration import files
from hilbot.driver.commands.calibrate import demo_ranges
from hilbot.driver.commands.sim_bus import joint_ranges
from hilbot.driver.runtime.backends import virtual_margin_ms
from hilbot.driver.runtime.config import RobotConfig, load_config
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.mapping import ServoSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.hand import Hand, Keyframes, move_to, sweep
from hilbot.sim.mounting import Mounting, mounted
from hilbot.sim.virtual_bus import VirtualBus

ROBOT = "koch_v1_1_follower"
TICK = 2 * math.pi / 4096
#: The arm as assembled: the shoulder horn 11.5° off, the elbow servo 23° off and turned around.
MOUNTS = {2: Mounting(-0.2), 3: Mounting(0.4, reversed=True)}
#: [s] for a prompt to appear. Measured on an idle 2-core host: the first prompt (start-up,
#: imports, six pings) 0.9 s after the start, each later one well under 1 s after the key
#: or move before it; a host busy with other work is many times slower.
WAIT = 90.0
#: [s] of each leg of the hand's moves (a person's are slower; this keeps the test short).
LEG = 0.3
#: [rad] how far the hand moves a joint the positive way at step 3 (as the demo hand does).
NUDGE = 0.4
#: Started in the child before the command: a session of its own whose controlling
#: terminal is the pty on its stdin (Ctrl-C there is its SIGINT), then the command itself.
SESSION = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'hilbot', *sys.argv[1:]])"
)
INTERRUPTED = "hilbot calibrate: interrupted; no calibration file written"
INPUT_ENDED = "hilbot calibrate: the input ended at a prompt; no calibration file written"


class Terminal:
    """The person's side of a pseudo-terminal that ``hilbot calibrate`` runs on.

    A thread keeps reading the screen (the live status line is redrawn 50 times a second:
    an unread terminal would fill and stall the command).
    """

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        controller, terminal = os.openpty()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", SESSION, *argv],
                stdin=terminal,
                stdout=terminal,
                stderr=terminal,
                start_new_session=True,
                env={**os.environ, **env},
            )
        except BaseException:
            os.close(controller)
            raise
        finally:
            os.close(terminal)
        self._controller = controller
        self._screen = b""
        self._closed = False  # the reader saw the end of the terminal
        self._seen = 0  # where the last expected text ended
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="terminal-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._controller, 65536)
            except OSError:  # EIO: the command's end of the terminal is closed
                chunk = b""
            with self._changed:
                self._screen += chunk
                self._closed = not chunk
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def screen(self) -> str:
        """Everything the command wrote, as a terminal received it (lines end in CR LF)."""
        with self._changed:
            return self._screen.decode(errors="replace")

    def expect(self, text: str, timeout: float = WAIT) -> str:
        """Wait for ``text`` after the last text expected; what came before it."""
        wanted = text.encode()
        deadline = time.monotonic() + timeout
        with self._changed:
            while (at := self._screen.find(wanted, self._seen)) < 0:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    shown = self._screen.decode(errors="replace")
                    raise AssertionError(f"no {text!r} on the terminal; it shows:\n{shown}")
                self._changed.wait(left)
            before = self._screen[self._seen : at].decode(errors="replace")
            self._seen = at + len(wanted)
            return before

    def type(self, keys: str) -> None:
        """Type ``keys`` (``\\r`` is Enter, ``\\x03`` Ctrl-C, ``\\x04`` Ctrl-D)."""
        os.write(self._controller, keys.encode())

    def exit_code(self, timeout: float = WAIT) -> int:
        """Wait for the command to end and the terminal to be read to its end."""
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code

    def close(self) -> None:
        """End the command if it is still running; close the terminal."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT)
        self._reader.join(WAIT)
        os.close(self._controller)


@dataclass
class Arm:
    """The arm on its virtual bus, the config the command runs with, and the hand."""

    config: RobotConfig
    config_file: Path
    true: tuple[ServoSpec, ...]
    bus: VirtualBus
    hand: Hand
    ranges: dict[str, tuple[float, float]]
    home: Path  # $XDG_CONFIG_HOME of the command

    def start(self, *options: str) -> Terminal:
        argv = ["calibrate", str(self.config_file), "--port", self.bus.port, *options]
        return Terminal(argv, {"XDG_CONFIG_HOME": str(self.home)})

    def torque(self) -> list[int]:
        return [self.bus.register(s.id, RegisterName.TORQUE_ENABLE) for s in self.true]

    def homing(self) -> list[int]:
        return [self.bus.register(s.id, RegisterName.HOMING_OFFSET) for s in self.true]

    def calibration_files(self) -> list[Path]:
        return sorted(self.home.rglob("*.yaml"))

    def middle_pose(self) -> dict[str, float]:
        middle = self.config.calibration.middle_pose
        return {j: middle.get(j, 0.0) for j in self.config.joint_names}

    def move(self, motion: Keyframes) -> None:
        assert self.hand.perform(motion, timeout=WAIT), "the hand did not finish its move"


@pytest.fixture
def arm(tmp_path: Path) -> Iterator[Arm]:
    # The shipped config, with the reply margin the virtual bus needs on this host (the
    # command's hardware path takes the config's reply_margin_ms).
    source = config_path(ROBOT)
    data = yaml.safe_load(source.read_text())
    data["urdf"] = str(source.parent / data["urdf"])
    data["buses"][0]["reply_margin_ms"] = virtual_margin_ms()
    config_file = tmp_path / f"{ROBOT}.yaml"
    config_file.write_text(yaml.safe_dump(data))
    config = load_config(ROBOT)
    true = mounted(config.servo_specs(), MOUNTS)
    vbus = running_virtual_bus(true, initial_positions=dict(config.home), return_delay_time=0)
    home = tmp_path / "home"
    home.mkdir()
    with vbus as bus, Hand(bus, true) as hand:
        for spec in true:  # as a run that ended without torque off left them
            bus.write_register(spec.id, RegisterName.TORQUE_ENABLE, 1)
        ranges = demo_ranges(joint_ranges(config))
        yield Arm(config, config_file, true, bus, hand, ranges, home)


def _answer_steps(arm: Arm, term: Terminal, *, sweep_ranges: bool = True) -> None:
    """Do what steps 1 to 3 ask, as a person would: move the arm, then press Enter."""
    term.expect("torque goes off")
    term.expect("Press Enter when the arm is there.")
    assert arm.torque() == [0] * len(arm.true)  # the hand can move the arm now
    pose = arm.middle_pose()
    arm.move(move_to(pose, 2 * LEG))
    term.type("\r")
    term.expect("Press Enter when every joint has been to both ends.")
    if sweep_ranges:
        arm.move(sweep(arm.ranges, pose, seconds=LEG, hold=2 * LEG))  # a reading at each end
    term.type("\r")
    for joint in arm.config.joint_names:
        term.expect(f"Step 3: move {joint} a little")
        nudged = min(pose[joint] + NUDGE, arm.ranges[joint][1])
        arm.move(Keyframes(((LEG, {joint: nudged}), (LEG, {joint: pose[joint]}))))


def test_a_person_answering_every_prompt_gets_the_calibration_file(arm: Arm) -> None:
    term = arm.start("--write-servos")
    try:
        _answer_steps(arm, term)
        term.expect("Write Homing Offset and Min/Max Position Limit to the EEPROM of 6 servos")
        term.expect("[y/N] ")
        term.type("y\r")
        term.expect("Written and read back.")
        term.expect("Calibration written to ")
        assert term.exit_code() == 0, term.screen
    finally:
        term.close()
    assert "Traceback" not in term.screen
    assert "(reversed vs config)" in term.screen  # the summary names the turned-around elbow
    # The file, where the docs say (the adapter's key: the port's name), with what was measured.
    path = arm.home / "hilbot" / "calibration" / f"{ROBOT}-{files.port_key(arm.bus.port)}.yaml"
    assert arm.calibration_files() == [path]
    assert f"Calibration written to {path}" in term.screen
    data = yaml.safe_load(path.read_text())
    assert data["robot"] == ROBOT and data["port"] == Path(arm.bus.port).name
    assert list(data["joints"]) == list(arm.config.joint_names)
    written = dict(zip((s.joint for s in arm.true), arm.homing(), strict=True))
    for spec in arm.true:
        joint = data["joints"][spec.joint]
        assert joint["servo_id"] == spec.id, spec.joint
        assert joint["direction"] == spec.direction, spec.joint  # -1 for the reversed elbow
        # Homing Offset written: the middle pose reads the center tick, so no offset is left.
        assert joint["offset"] == pytest.approx(0.0, abs=TICK), spec.joint
        assert joint["homing_offset"] == written[spec.joint], spec.joint
        assert joint["range"] == pytest.approx(list(arm.ranges[spec.joint]), abs=0.03), spec.joint
    assert data["joints"]["elbow_flex"]["direction"] == -1
    assert data["joints"]["shoulder_lift"]["homing_offset"] == -round(0.2 / TICK)
    assert files.load(path).joints["elbow_flex"].direction == -1  # and it loads back
    assert arm.torque() == [0] * len(arm.true)  # the arm is left limp, as the docs say
    assert arm.bus.errors == []


@pytest.mark.parametrize(
    ("at_step", "keys", "code", "message"),
    [
        (1, "\x03", 130, INTERRUPTED),
        (2, "\x03", 130, INTERRUPTED),  # while the live line is redrawn
        (1, "\x04", 1, INPUT_ENDED),
        (2, "\x04", 1, INPUT_ENDED),
    ],
    ids=["ctrl-c at step 1", "ctrl-c at step 2", "ctrl-d at step 1", "ctrl-d at step 2"],
)
def test_a_person_who_gives_up_at_a_prompt_gets_one_line_and_no_file(
    arm: Arm, at_step: int, keys: str, code: int, message: str
) -> None:
    term = arm.start()
    try:
        term.expect("Press Enter when the arm is there.")
        if at_step == 2:
            arm.move(move_to(arm.middle_pose(), 2 * LEG))
            term.type("\r")
            term.expect("Press Enter when every joint has been to both ends.")
        term.type(keys)
        term.expect(message)
        assert term.exit_code() == code, term.screen
    finally:
        term.close()
    screen = term.screen
    assert screen.count("hilbot calibrate:") == 1
    assert f"\n{message}\r\n" in screen  # a line of its own, below the prompt
    assert screen.split(message, 1)[1].strip() == ""  # the last thing said
    assert "Traceback" not in term.screen
    assert arm.calibration_files() == []
    assert arm.torque() == [0] * len(arm.true)  # off since step 1, as the docs say
    assert arm.homing() == [0] * len(arm.true)


def test_an_answer_other_than_yes_writes_nothing_to_the_servos(arm: Arm) -> None:
    term = arm.start("--write-servos")
    try:
        _answer_steps(arm, term, sweep_ranges=False)  # Enter without moving: a short range
        term.expect("[y/N] ")
        term.type("maybe\r")
        term.expect("Nothing written to the servos; the calibration goes to the file only.")
        term.expect("Calibration written to ")
        assert term.exit_code() == 0, term.screen
    finally:
        term.close()
    assert "Written and read back." not in term.screen and "Traceback" not in term.screen
    assert arm.homing() == [0] * len(arm.true)  # the EEPROM is as it was
    (path,) = arm.calibration_files()
    data = yaml.safe_load(path.read_text())
    for spec in arm.true:
        joint = data["joints"][spec.joint]
        assert joint["direction"] == spec.direction, spec.joint
        assert joint["offset"] == pytest.approx(spec.offset, abs=3 * TICK), spec.joint
        assert joint["homing_offset"] is None, spec.joint
