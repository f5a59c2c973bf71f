"""LeRobot's ``lerobot-setup-motors`` for the SO-101 follower, end to end, on one virtual bus.

A person setting up a new arm runs ``lerobot-setup-motors``; for each motor, last first,
it asks to connect that motor alone and press Enter, then gives the factory servo it
finds (id 1, factory bit rate) the motor's id and the arm's bit rate. Here the servos
are plugged in one at a time on one ``hilbot sim-bus --plug-in-one-at-a-time``, and the
test answers LeRobot's prompts on its stdin, one at a time. Then all six must answer at
their ids and rate, and still after a restart of the bus (EEPROM).

LeRobot runs in its own environment: ``HILBOT_LEROBOT_PYTHON`` names its python (see
test_lerobot_motor_buses.py); without it these tests are skipped.
"""

from __future__ import annotations

import io
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.lerobot.test_lerobot_motor_buses import LEROBOT_PYTHON, lerobot, sim_bus

COMMAND = Path(__file__).with_name("lerobot_command.py")
SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]

pytestmark = pytest.mark.skipif(
    not LEROBOT_PYTHON, reason="HILBOT_LEROBOT_PYTHON (a python with lerobot) is not set"
)


class Transcript:
    """What a process writes, read as it comes.

    A binary stream is read as bytes arrive (LeRobot's prompts end without a newline); a
    text stream line by line (``sim_bus`` has read its first line through its buffer).
    """

    def __init__(self, stream: IO[bytes] | IO[str] | None) -> None:
        assert stream is not None
        self.text = ""
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes] | IO[str]) -> None:
        if isinstance(stream, io.TextIOBase):
            chunks: Iterator[str] = iter(stream.readline, "")
        else:
            raw = stream.fileno()
            chunks = iter(lambda: os.read(raw, 4096).decode(errors="replace"), "")
        for chunk in chunks:
            with self._changed:
                self.text += chunk
                self._changed.notify_all()

    def wait_for(self, text: str, after: int = 0, timeout: float = 300.0) -> int:
        """Wait until ``text`` appears at or after ``after``; where it ends."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while (at := self.text.find(text, after)) < 0:
                left = deadline - time.monotonic()
                assert left > 0, f"no {text!r} within {timeout} s; so far:\n{self.text[after:]}"
                self._changed.wait(min(left, 1.0))
            return at + len(text)


def test_lerobot_setup_motors_sets_up_the_so101_follower_on_one_bus(tmp_path: Path) -> None:
    state = str(tmp_path / "arm.json")
    with sim_bus("so101_follower", "--plug-in-one-at-a-time", "--eeprom-file", state) as (
        port,
        bus,
    ):
        bus_says = Transcript(bus.stdout)
        command = [str(COMMAND), "lerobot-setup-motors"]
        with subprocess.Popen(
            [LEROBOT_PYTHON, *command, "--robot.type=so101_follower", f"--robot.port={port}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        ) as setup:
            try:
                assert setup.stdin is not None
                says = Transcript(setup.stdout)
                seen = heard = 0
                for number, motor in enumerate(reversed(SO101), 1):
                    servo = f"{motor} (servo {SO101.index(motor) + 1})"
                    seen = says.wait_for(
                        f"Connect the controller board to the '{motor}' motor", seen
                    )
                    setup.stdin.write(b"\n")
                    setup.stdin.flush()
                    # LeRobot's search plugs in the motor it asked for, alone, a factory servo...
                    heard = bus_says.wait_for(
                        f"plugged in: {servo} ({number} of 6), a factory", heard
                    )
                    heard = bus_says.wait_for("id 1 at 1000000 bit/s", heard)
                    # ...and gives it its id, at the arm's rate.
                    heard = bus_says.wait_for(
                        f"{servo} is set up: id {SO101.index(motor) + 1} at 1000000 bit/s", heard
                    )
                    seen = says.wait_for(
                        f"'{motor}' motor id set to {SO101.index(motor) + 1}", seen
                    )
                assert setup.wait(timeout=120) == 0, says.text
            finally:
                if setup.poll() is None:
                    setup.kill()
        bus_says.wait_for("every servo is connected", heard)
        # All six at their ids and at the arm's rate only, on the running bus...
        assert lerobot("feetech-scan", port)["found"] == {"1000000": [1, 2, 3, 4, 5, 6]}
    # ...and after a restart: the ids and the rate were written to EEPROM.
    with sim_bus("so101_follower", "--eeprom-file", state) as (port, _):
        assert lerobot("feetech-scan", port)["found"] == {"1000000": [1, 2, 3, 4, 5, 6]}
