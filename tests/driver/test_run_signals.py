"""`hilbot run` as a separate process, stopped by a signal: the robot ends with torque off."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hilbot.driver.runtime.backends import virtual_margin_ms
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.sim import running_virtual_bus

IDS = range(11, 16)  # the OpenManipulator-X's servos
WAIT = 60.0  # [s] generous: start-up imports and the bus check on a busy machine


def _wait_for(condition, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"hilbot run exited ({proc.returncode}) before {what}: {log.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {WAIT} s: {log.read_text()}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes], log: Path) -> int:
    try:
        return proc.wait(WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"hilbot run did not stop: {log.read_text()}")


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_signal_stops_the_run_with_torque_off(sig, make_config, config_data_of, tmp_path):
    config = make_config("openmanipulator_x")
    data = config_data_of("openmanipulator_x")
    log = tmp_path / "stderr.txt"
    with running_virtual_bus(
        config.servo_specs(), initial_positions=dict(config.home), return_delay_time=0
    ) as vbus:
        data["buses"][0]["port"] = vbus.port
        # The servos answer from a thread of this busy test process, not from a bus of
        # their own: the reply margin comes from the host's measured stalls, as the
        # virtual backend's does.
        data["buses"][0]["reply_margin_ms"] = virtual_margin_ms(config.safety.bus_watchdog)
        path = tmp_path / "robot.yaml"
        path.write_text(yaml.safe_dump(data))
        args = [sys.executable, "-m", "hilbot", "-v", "run", str(path), "--backend", "hardware"]
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [*args, "--enable", "--no-mqtt", "--no-status"],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            torque = [lambda i=i: vbus.register(i, RegisterName.TORQUE_ENABLE) for i in IDS]
            _wait_for(lambda: all(t() == 1 for t in torque), "torque on", proc, log)
            proc.send_signal(sig)
            code = _stop(proc, log)
        # Ctrl+C (SIGINT) exits 130, as hilbot lead and bench; a requested end 0
        assert code == (130 if sig == signal.SIGINT else 0), log.read_text()
        assert all(t() == 0 for t in torque)
    assert "shutdown: torque off" in log.read_text()


def test_ctrl_c_on_the_virtual_backend_reaches_torque_off(tmp_path):
    # Ctrl+C at a terminal signals the whole foreground process group; the virtual bus
    # (a child process) must still be there when the runtime turns torque off.
    log = tmp_path / "stderr.txt"
    args = [sys.executable, "-m", "hilbot", "-v", "run", "--backend", "virtual", "--enable"]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*args, "--no-mqtt", "--no-status", "--rate", "50"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,  # a process group of its own, as a terminal job has
        )
        _wait_for(lambda: "command enable done" in log.read_text(), "enable", proc, log)
        os.killpg(proc.pid, signal.SIGINT)
        code = _stop(proc, log)
    text = log.read_text()
    assert code == 130, text
    assert "shutdown: torque off" in text and "could not disable torque" not in text
