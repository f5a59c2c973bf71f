"""hilbot lead refuses a stale calibration, as hilbot run does: nothing is enabled.

The follower is a virtual bus served from this test process, driven by the real
hardware backend of a ``hilbot lead`` subprocess through its pseudo-terminal, so the
test sees every torque write the follower's servos get.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hilbot.driver.calibration import files
from hilbot.driver.commands.sim_bus import joint_ranges
from hilbot.driver.runtime.backends import virtual_margin_ms
from hilbot.driver.runtime.config import RobotConfig, load_config
from hilbot.hal.calibration import Calibration
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.sim import running_virtual_bus
from hilbot.sim.virtual_bus import VirtualBus

FOLLOWER = "koch_v1_1_follower"
LEADER = "koch_v1_1_leader"
WRIST = 4  # the follower's wrist_flex servo
#: [ticks] (~123°) another tool put in the wrist's Homing Offset after calibrating: it
#: reads about 2.75 rad at home, inside the servo's own limits, far outside the file's range.
SHIFT = 1400


def _calibration(config: RobotConfig, port: str, **ranges: tuple[float, float]) -> Calibration:
    """What hilbot calibrate writes for an arm assembled as ``config`` says: its own
    offsets and directions, every joint seen through its URDF range (or ``ranges``)."""
    urdf = joint_ranges(config)
    joints = {
        s.joint: {
            "servo_id": s.id,
            "offset": s.offset,
            "direction": s.direction,
            "range": list(ranges.get(s.joint, urdf[s.joint])),
        }
        for s in config.servos
    }
    data = {"format": 1, "robot": config.name, "port": port, "joints": joints}
    return Calibration.from_data(yaml.safe_load(yaml.safe_dump(data)))


class TorqueWatch:
    """Polls the follower's Torque Enable registers while a command runs."""

    def __init__(self, bus: VirtualBus, ids: list[int]) -> None:
        self.bus, self.ids = bus, ids
        self.seen_on: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            on = [i for i in self.ids if self.bus.register(i, RegisterName.TORQUE_ENABLE)]
            self.seen_on.extend(i for i in on if i not in self.seen_on)

    def __enter__(self) -> TorqueWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def follower_bus(
    tmp_path: Path, config_data_of: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[VirtualBus, Path]]:
    """The follower on a virtual bus of its own, and a config file naming its port."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # where the calibrations go
    config = load_config(FOLLOWER)
    data = config_data_of(FOLLOWER)
    with running_virtual_bus(
        config.servo_specs(), initial_positions=dict(config.home), return_delay_time=0
    ) as bus:
        data["buses"][0]["port"] = bus.port
        data["buses"][0]["reply_margin_ms"] = virtual_margin_ms(config.safety.bus_watchdog)
        path = tmp_path / "follower.yaml"
        path.write_text(yaml.safe_dump(data))
        yield bus, path


def _lead(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", "lead", LEADER, "--backend", "virtual", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ),  # XDG_CONFIG_HOME: the test's folder
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    err = result.stderr
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hilbot lead: "), err
    return lines[0]


def test_lead_refuses_a_follower_whose_calibration_is_stale(
    follower_bus: tuple[VirtualBus, Path],
) -> None:
    bus, path = follower_bus
    config = load_config(path)
    files.save(_calibration(config, bus.port), files.default_path(FOLLOWER, bus.port))
    ids = [s.id for s in config.servos]
    follow = ["--to", str(path), "--follower-backend", "hardware", "--no-status"]
    # The file fits the arm: the follower is enabled and led (the watch sees torque on).
    with TorqueWatch(bus, ids) as watch:
        fresh = _lead(*follow, "--duration", "2")
    assert fresh.returncode == 0, fresh.stderr
    assert "follower armed" in fresh.stdout
    assert watch.seen_on
    # The wrist's Homing Offset no longer is the one calibrated with: the file is stale.
    assert not any(bus.register(i, RegisterName.TORQUE_ENABLE) for i in ids)
    assert bus.write_register(WRIST, RegisterName.HOMING_OFFSET, SHIFT) == 0
    with TorqueWatch(bus, ids) as watch:
        stale = _lead(*follow, "--duration", "2")
    line = _one_line(stale)
    assert stale.returncode == 2
    assert "the calibration no longer matches the arm" in line
    assert "wrist_flex reads" in line and "Nothing was enabled" in line
    assert watch.seen_on == []  # torque never came on, on any follower servo
    assert "published" not in stale.stdout


def test_lead_refuses_a_leader_whose_calibration_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The leader's file says its wrist was seen in -1..0 rad only; it reads 0.6 (home).
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    leader = load_config(LEADER)
    calibration = _calibration(leader, "virtual", wrist_flex=(-1.0, 0.0))
    files.save(calibration, files.default_path(LEADER, "", virtual=True))
    result = _lead("--follower-backend", "sim", "--duration", "2", "--no-status")
    line = _one_line(result)
    assert result.returncode == 2
    assert "wrist_flex reads +0.600 rad" in line and "hilbot calibrate" in line
    assert "published" not in result.stdout
