"""``hilbot teleop`` in a subprocess: a status line on its terminal says what it sends."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys

import pytest

from hilbot.driver.cli import build_parser
from hilbot.driver.commands import teleop as command

WAIT = 120.0  # [s] start-up imports on a busy machine


def parse(*argv: str):
    return build_parser(load="teleop").parse_args(["teleop", *argv])


def read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end is closed: all read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


async def test_the_status_line_shows_pattern_rate_and_last_target(kit, mosquitto):
    async with kit.running_sim() as runtime, kit.serving(runtime, mosquitto.url):
        controller, terminal = pty.openpty()
        args = [sys.executable, "-m", "hilbot", "teleop", "--mqtt", mosquitto.url]
        proc = await asyncio.create_subprocess_exec(
            *args, "--radius", "0.02", "--rate", "40", "--duration", "2",
            stdout=subprocess.PIPE, stderr=terminal, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(terminal)
        out, _ = await asyncio.wait_for(proc.communicate(), WAIT)
        screen = await asyncio.to_thread(read_all, controller)
    assert proc.returncode == 0, screen
    assert "Traceback" not in screen
    shown = [part for part in screen.split("\r") if part.startswith("circle ")]
    assert len(shown) >= 2, screen  # redrawn while sending
    last = shown[-1]
    assert "r=0.02 m in yz on 'arm' at 40 Hz:" in last
    assert "targets, last [" in last and "] m; robot armed" in last
    assert "published" in out.decode()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--pattern", "jog", "--radius", "0.05"), "--radius: not used by keyboard jogging"),
        (("--pattern", "jog", "--duration", "3"), "--duration: not used by keyboard jogging"),
        (("--pattern", "circle", "--step", "0.01"), "--step: not used by --pattern circle"),
    ],
)
def test_options_a_pattern_does_not_use_are_refused(argv, words, capsys):
    assert command.run(parse(*argv)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hilbot teleop: ") and words in err and "\n" not in err


@pytest.mark.parametrize("option", ["--rate", "--radius", "--period", "--duration", "--step"])
def test_numbers_must_be_positive(option):
    result = subprocess.run(
        [sys.executable, "-m", "hilbot", "teleop", option, "-1"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"argument {option}: must be a finite number above 0" in lines[0]
