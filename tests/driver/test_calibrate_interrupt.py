"""Ctrl+C during ``hilbot calibrate --demo``: one press, exit 130, one line, no file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

START = 120.0  # [s] start-up on a busy host (imports, the virtual bus, the first steps)
STOP = 20.0  # [s] for the whole shutdown after one Ctrl+C (it hung for over 60 s)


def test_one_ctrl_c_mid_calibration_ends_it_in_one_line_with_130(tmp_path: Path) -> None:
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hilbot", "calibrate", "koch_v1_1_follower",
             "--backend", "virtual", "--demo"],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own group, signalled as a terminal's Ctrl+C is
            env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + START
            while "[demo] the hand sweeps" not in out_path.read_text():
                assert proc.poll() is None, err_path.read_text()
                assert time.monotonic() < deadline, out_path.read_text()
                time.sleep(0.05)
            time.sleep(0.5)  # the hand is mid-sweep (step 2 takes seconds)
            os.killpg(proc.pid, signal.SIGINT)
            started = time.monotonic()
            code = proc.wait(timeout=STOP + 30)
            took = time.monotonic() - started
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    err_text = err_path.read_text()
    assert code == 130, err_text
    assert took < STOP, f"the shutdown took {took:.1f} s"
    assert err_text.strip().splitlines() == [
        "hilbot calibrate: interrupted; no calibration file written"
    ], err_text
    assert not (tmp_path / "hilbot" / "calibration").exists()
