"""hilbot lead --leader-port / --follower-port: both arms on buses the configs do not name."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from hilbot.driver.runtime.backends import virtual_margin_ms
from tests.driver.conftest import CliResult

WAIT = 120.0  # [s] start-up on a busy host


def _hilbot(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "XDG_CONFIG_HOME": str(cwd / "xdg")},
    )


@contextlib.contextmanager
def _sim_bus(*args: str) -> Iterator[str]:
    """A ``hilbot sim-bus`` process of its own; yields its pty once it says it."""
    with subprocess.Popen(
        [sys.executable, "-m", "hilbot", "sim-bus", *args, "--return-delay", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # blocks until the bus is up (or the process ends)
            assert line.startswith("main: "), line
            yield line.split()[1]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _slow_reply_copy(robot: str, folder: Path) -> Path:
    """``robot`` as a user's copy: ``extends`` it, a reply margin for a busy host's ptys."""
    path = folder / f"{robot}.yaml"
    margin = max(virtual_margin_ms(), 20.0)
    path.write_text(
        yaml.safe_dump({"extends": robot, "buses": [{"name": "main", "reply_margin_ms": margin}]})
    )
    return path


def test_lead_drives_a_follower_on_the_ports_given(tmp_path: Path) -> None:
    # Neither config names these ptys: without the two options the lead cannot open them.
    leader = _slow_reply_copy("koch_v1_1_leader", tmp_path)
    follower = _slow_reply_copy("koch_v1_1_follower", tmp_path)
    with (
        _sim_bus("koch_v1_1_leader", "--hand", "wave") as lport,
        _sim_bus("koch_v1_1_follower") as fport,
    ):
        started = time.monotonic()
        done = _hilbot(
            "-v", "lead", leader.name, "--to", follower.name, "--leader-port", lport,
            "--follower-port", fport, "--duration", "3", "--no-status", cwd=tmp_path,
        )  # fmt: skip
        assert time.monotonic() - started < WAIT + 60
    assert done.returncode == 0, done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("published "), done.stdout
    assert int(summary.split()[1]) > 0, summary
    # the follower on its port was armed (a busy host's late replies may fault it later:
    # that is its bus timing, not the port it was given)
    assert "command enable done; mode armed" in done.stderr
    assert "rejected" not in summary and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--backend", "virtual", "--leader-port", "/dev/x"], "--leader-port is for --backend"),
        (["--mqtt", "mqtt://127.0.0.1:1", "--follower-port", "/dev/x"], "with --mqtt it runs"),
        (["--follower-backend", "sim", "--follower-port", "/dev/x"], "not sim"),
    ],
    ids=["virtual leader", "remote follower", "sim follower"],
)
def test_port_options_that_would_be_ignored_are_refused(
    argv: list[str],
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hilbot_main: Callable[..., CliResult],
) -> None:
    monkeypatch.chdir(tmp_path)  # the command line in this process: refused before a port opens
    done = hilbot_main("lead", "koch_v1_1_leader", *argv)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0], done.stderr


def test_a_leader_port_that_cannot_open_names_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hilbot_main: Callable[..., CliResult]
) -> None:
    port = str(tmp_path / "ttyNOPE")
    lead = ["lead", "koch_v1_1_leader", "--mqtt", "mqtt://127.0.0.1:1", "--leader-port", port]
    monkeypatch.chdir(tmp_path)
    done = hilbot_main(*lead, "--duration", "1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{port} (from --leader-port)" in lines[0], done.stderr
