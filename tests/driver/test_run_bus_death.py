"""A run whose bus dies, and whose torque could not be turned off, exits non-zero.

``hilbot run --backend virtual`` with its virtual bus (a child process) killed or frozen
mid-run: the shutdown cannot turn torque off. The run must say so, say what the servos are
left doing, and exit 1 (it exited 0).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAIT = 90.0  # [s] generous: start-up imports and the bus check on a busy machine


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _wait_for(condition, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"hilbot run exited ({proc.returncode}) before {what}: {log.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {WAIT} s: {log.read_text()}")
        time.sleep(0.05)


@pytest.mark.parametrize("death", ["killed", "frozen"])
def test_a_run_whose_bus_died_with_torque_on_exits_non_zero(tmp_path, death):
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    args = [sys.executable, "-m", "hilbot", "-v", "run", "--backend", "virtual", "--enable"]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [*args, "--no-mqtt", "--no-status"], stdout=stdout, stderr=stderr, cwd=tmp_path
        )
    bus = None
    try:
        _wait_for(lambda: "mode armed" in err.read_text(), "the robot armed", proc, err)
        [bus] = _children(proc.pid)
        os.kill(bus, signal.SIGKILL if death == "killed" else signal.SIGSTOP)
        _wait_for(lambda: "fault" in err.read_text(), "a bus fault", proc, err)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if death == "frozen" and bus is not None:  # the run ended it, unless it failed
            for signum in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(bus, signum)
    said = out.read_text() + err.read_text()
    assert code == 1, said
    [line] = [ln for ln in out.read_text().splitlines() if ln.startswith("shutdown:")]
    assert line.startswith("shutdown: could not turn torque off on 5 servos"), line
    assert "they may still have torque on, holding their last goal" in line, line
    assert "Traceback" not in said
