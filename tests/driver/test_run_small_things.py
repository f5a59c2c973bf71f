"""hilbot run: the broker line at start, Ctrl+C's exit status and summary, --view-port.

(``--view-port`` without ``--view`` is refused by bench and replay as well.)
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hilbot.driver.cli import main

HILBOT = [sys.executable, "-m", "hilbot"]
WAIT = 60.0  # [s] start-up on a busy machine


def _wait_for(text: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WAIT
    while text not in log.read_text():
        if proc.poll() is not None:
            pytest.fail(f"hilbot run exited ({proc.returncode}) before {text!r}: {log.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {text!r} within {WAIT} s: {log.read_text()}")
        time.sleep(0.05)


def test_view_port_without_view_is_refused_in_one_line(capsys):
    assert main(["run", "--no-mqtt", "--duration", "1", "--view-port", "9000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--view-port is the port of --view; add --view" in err


@pytest.mark.parametrize(
    "command",
    [
        ["bench", "openmanipulator_x", "--scenario", "openmanipulator_sweep"],
        ["replay", "recording.npz"],
    ],
    ids=["bench", "replay"],
)
def test_bench_and_replay_refuse_view_port_without_view_too(command, capsys):
    assert main([*command, "--view-port", "9000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--view-port is the port of --view" in err


def test_ctrl_c_exits_130_and_the_summary_says_disarmed_after_torque_off(tmp_path):
    log = tmp_path / "stderr.txt"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*HILBOT, "-v", "run", "--enable", "--no-mqtt", "--no-status"],
            stdout=subprocess.PIPE,
            stderr=err,
        )
        _wait_for("command enable done", proc, log)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=WAIT)
    assert proc.returncode == 130, log.read_text()
    lines = out.decode().splitlines()
    shutdown = next(i for i, line in enumerate(lines) if line.startswith("shutdown:"))
    assert lines[shutdown] == "shutdown: torque off on 5 servos"
    summary = lines[-1]
    assert "Hz" in summary and summary.split()[0] == "disarmed", lines


def test_run_says_where_the_broker_is_and_how_to_drive_it(tmp_path):
    log = tmp_path / "stderr.txt"
    args = [*HILBOT, "run", "--broker-port", "0", "--no-status", "--duration", "60"]
    with log.open("wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        try:
            _wait_for("hilbot teleop", proc, log)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(WAIT)
    assert proc.returncode == 0, log.read_text()  # SIGTERM: a requested end, not Ctrl+C
    (line,) = [line for line in log.read_text().splitlines() if line.startswith("teleop:")]
    url = re.search(r"MQTT broker (mqtt://127\.0\.0\.1:(\d+)),", line)
    assert url is not None and url[2] != "0", line
    assert "topics hilbot/openmanipulator_x/..." in line
    # the embedded broker took any free port: the hint names it
    assert line.endswith(f"hilbot teleop --mqtt {url[1]} --pattern jog (or --pattern circle)")
