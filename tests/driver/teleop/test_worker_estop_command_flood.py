"""A flood of e-stops on ``cmd`` costs the teleop worker CPU, not the control loop.

``hilbot run`` drives the virtual bus (its own process) through the real Dynamixel
backend, with its teleop worker on a real mosquitto and ``--record``; the test floods
``cmd`` with thousands of e-stops from a paho client. The loop keeps its rate through the
flood (read off the recording), a ``reset`` right after is acted on at once, and a Ctrl+C
right after a flood shuts down quietly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import paho.mqtt.client as mqtt
import pytest
import yaml

from hilbot.driver.bench.recording import Recording

WAIT = 60.0  # [s] generous: start-up imports and the bus check on a busy machine
RATE_HZ = 100.0  # the loop's rate in this test
FLOOD = 3000  # e-stops per flood
FLOOD_S = 1.5  # [s] they are sent over
#: [s] a reset after the flood is acted on within this (the old code: ~50 s, behind the
#: e-stops queued in the runtime, each turning torque off on the bus).
RESET_WITHIN_S = 2.0
PAYLOAD = json.dumps({"command": "estop"})


class Watcher:
    """A paho client that keeps the newest ``state`` and ``status`` of the robot."""

    def __init__(self, port: int, prefix: str) -> None:
        self.prefix = prefix
        self.latest: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"w{os.getpid()}")
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.subscribe([(f"{prefix}/state", 0), (f"{prefix}/status", 1)])
        self.client.loop_start()

    def _on_message(self, _client: Any, _userdata: Any, message: Any) -> None:
        with self.lock:
            self.latest[message.topic.rsplit("/", 1)[-1]] = json.loads(message.payload)

    def get(self, kind: str) -> dict[str, Any] | None:
        with self.lock:
            return self.latest.get(kind)

    def mode(self) -> str | None:
        state = self.get("state")
        return None if state is None else state["mode"]

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def wait_for(condition: Any, what: str, proc: subprocess.Popen[bytes], log: Path, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"hilbot run exited before {what}: {log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout} s: {log.read_text()[-3000:]}")
        time.sleep(0.01)


def flood(port: int, prefix: str) -> float:
    """Publish ``FLOOD`` e-stops over ``FLOOD_S``; returns when the last one went out."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"f{os.getpid()}")
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        start, batch = time.monotonic(), 100
        for i in range(0, FLOOD, batch):
            for _ in range(batch):
                client.publish(f"{prefix}/cmd", PAYLOAD, qos=0)
            time.sleep(max(0.0, start + FLOOD_S * (i + batch) / FLOOD - time.monotonic()))
        client.publish(f"{prefix}/cmd", PAYLOAD, qos=1).wait_for_publish(5)
    finally:
        client.loop_stop()
        client.disconnect()
    return time.monotonic()


def publish(port: int, topic: str, payload: str) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"c{os.getpid()}")
    client.connect("127.0.0.1", port)
    client.loop_start()
    client.publish(topic, payload, qos=1).wait_for_publish(5)
    client.loop_stop()
    client.disconnect()


@pytest.mark.parametrize("action", ["hold", "torque_off"])
def test_an_estop_flood_leaves_the_loop_its_rate_and_shuts_down_quietly(
    action, mosquitto, config_data_of, tmp_path
):
    data = config_data_of("openmanipulator_x")
    data["safety"] = {**data["safety"], "estop_action": action}
    config = tmp_path / "omx.yaml"
    config.write_text(yaml.safe_dump(data))
    prefix = f"hilbot/{data['name']}"
    recording, log = tmp_path / "run.npz", tmp_path / "stderr.txt"
    args = [
        sys.executable, "-m", "hilbot", "run", str(config), "--backend", "virtual",
        "--rate", str(RATE_HZ), "--enable", "--mqtt", mosquitto.url, "--no-status",
        "--record", str(recording),
    ]  # fmt: skip
    watcher = Watcher(mosquitto.port, prefix)
    with log.open("wb") as err:
        # A process group of its own, as a terminal job has: Ctrl+C reaches the teleop
        # worker and the virtual bus too.
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    try:
        wait_for(lambda: watcher.mode() == "armed", "armed", proc, log)
        flood(mosquitto.port, prefix)
        wait_for(lambda: watcher.mode() == "estopped", "the e-stop", proc, log, timeout=5)
        publish(mosquitto.port, f"{prefix}/cmd", json.dumps({"command": "reset"}))
        sent = time.monotonic()
        wait_for(lambda: watcher.mode() == "disarmed", "the reset", proc, log, timeout=60)
        took = time.monotonic() - sent
        assert took < RESET_WITHIN_S, f"the reset took {took:.1f} s after the flood"
        # The worker folds e-stops into the one in flight: not a task and a command each.
        ran = watcher.get("state")["teleop"]["commands"]
        assert ran < FLOOD / 5, f"{ran} commands run for {FLOOD} e-stops"
        # A second flood, and Ctrl+C right after it: e-stops may still be on their way.
        flood(mosquitto.port, prefix)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=WAIT)
    finally:
        watcher.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text()
    assert proc.returncode == 130, text  # Ctrl+C: 130, as hilbot lead and bench exit
    assert_the_loop_kept_its_rate(recording)
    assert "Traceback" not in text and "never retrieved" not in text, text
    assert "socket.send() raised exception" not in text, text[-3000:]
    assert len(text.splitlines()) < 20, text[-3000:]  # no flood of lines either
    assert b"shutdown: torque off" in out


def assert_the_loop_kept_its_rate(recording: Path) -> None:
    """From the first flood's e-stop to the end, cycles came at half the rate at least.

    A cycle is recorded when it runs: a loop stalled behind queued commands leaves a gap.
    """
    rec = Recording.load(recording)
    estopped = rec.channels["mode"] == rec.header.modes.index("estopped")
    first = int(np.argmax(estopped))
    assert estopped[first], "the run never e-stopped"
    t = rec.channels["t"][first:]
    span, cycles = t[-1] - t[0], len(t) - 1
    assert span > 2 * FLOOD_S, f"{span:.2f} s recorded from the e-stop to the end"
    assert cycles / span >= RATE_HZ / 2, f"{cycles} cycles in {span:.2f} s while flooded"
    gap = float(np.diff(t).max())
    assert gap < 0.25, f"the loop stood still for {gap:.2f} s"
    # The robot holds the pose it had at the e-stop, however many e-stops followed.
    stretch = estopped[first:]
    stretch = stretch[: int(np.argmin(stretch))] if not stretch.all() else stretch
    held = rec.channels["q_command"][first + 1 : first + len(stretch)]
    held = held[np.isfinite(held).all(axis=1)]  # torque_off writes no goal
    assert (held == held[:1]).all(), "the hold goal moved during the flood"
