"""A robot with a Dynamixel bus and a Feetech bus: one runtime, both real backends.

The SO-101 arm with its wrist and gripper moved to a second bus of Dynamixel XL330s
(as some builds do): the Feetech bus is served by the virtual Feetech bus, the
Dynamixel one by the virtual Dynamixel bus, each driven by its real backend behind
the multi-bus backend.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hilbot.driver.runtime.backends import MultiBackend, dynamixel_backend
from hilbot.driver.runtime.config import RobotConfig, parse_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, FaultKind
from hilbot.driver.runtime.validation import check_config
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.feetech.tables import FeetechRegister
from hilbot.sim import running_virtual_bus
from hilbot.sim.virtual_bus import FeetechVirtualBus
from tests.driver.conftest import VIRTUAL_RETRIES, config_data, cycles_until, virtual_margin_ms
from tests.driver.test_runtime_feetech import home_ticks

RATE = 100.0
FEETECH_IDS = range(1, 5)
DXL_IDS = (11, 12)


def mixed_data() -> dict[str, Any]:
    data = config_data("so101_follower")
    data["name"] = "so101_mixed"
    data["rate_hz"] = RATE
    data["chains"] = []
    data["buses"] = [
        {"name": "arm", "family": "feetech", "port": "/dev/ttyACM0", "baudrate": 1_000_000},
        {"name": "wrist", "port": "/dev/ttyUSB0", "baudrate": 1_000_000, "protocol": 2},
    ]
    for servo in data["servos"]:
        if servo["id"] <= 4:
            servo["bus"] = "arm"
        else:
            servo.update(bus="wrist", id=servo["id"] + 6, model="XL330-M288")
            servo.pop("torque_limit", None)  # the gripper's Feetech setting (refused here)
    data["safety"]["bus_watchdog"] = 0.5  # the Dynamixel bus has one
    return data


@pytest.fixture
def config() -> RobotConfig:
    config = parse_config(mixed_data())
    check_config(config)
    return config


@contextlib.asynccontextmanager
async def running(config: RobotConfig) -> AsyncIterator[tuple[Any, Any, Runtime]]:
    margin = virtual_margin_ms(config, VIRTUAL_RETRIES)
    arm = config.servo_specs("arm")
    servos = {s.id: s.model for s in arm}
    ticks = home_ticks(config, "arm")
    with FeetechVirtualBus(servos, 1_000_000, return_delay_time=0, initial_positions=ticks) as fbus:
        async with running_virtual_bus(
            config.servo_specs("wrist"), baudrate=1_000_000, initial_positions=dict(config.home)
        ) as dbus:
            backend = dynamixel_backend(
                config,
                {"arm": fbus.port, "wrist": dbus.port},
                margin_ms=margin,
                retries=VIRTUAL_RETRIES,
            )
            assert isinstance(backend, MultiBackend)
            async with Runtime(config, backend) as rt:
                yield fbus, dbus, rt
            assert fbus.errors == [] and dbus.errors == []


def feetech_torque(fbus: FeetechVirtualBus) -> list[int]:
    return [fbus.register(i, FeetechRegister.TORQUE_ENABLE) for i in FEETECH_IDS]


def dxl_torque(dbus: Any) -> list[int]:
    return [dbus.register(i, RegisterName.TORQUE_ENABLE) for i in DXL_IDS]


async def test_one_runtime_tracks_joints_on_both_families_and_turns_both_off(config):
    async with running(config) as (fbus, dbus, rt):
        assert rt.state().joints.positions() == pytest.approx(config.home, abs=0.01)
        await rt.command(Command.ENABLE)
        assert feetech_torque(fbus) == [1] * 4 and dxl_torque(dbus) == [1, 1]
        # the Dynamixel bus arms its servo-side watchdog; the Feetech bus has none to arm
        assert dbus.register(11, RegisterName.BUS_WATCHDOG) == 25
        targets = {"shoulder_pan": 0.3, "elbow_flex": 0.6, "wrist_roll": -0.4, "gripper": 0.5}
        for _ in range(int(1.5 * RATE)):
            rt.set_joint_targets(targets)
            await rt.wait_cycles(1)
        now = rt.state().joints.positions()
        for joint, value in targets.items():
            assert now[joint] == pytest.approx(value, abs=0.02), joint
    assert feetech_torque(fbus) == [0] * 4 and dxl_torque(dbus) == [0, 0]


async def test_a_fault_on_the_feetech_bus_disarms_the_whole_robot(config):
    async with running(config) as (fbus, dbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        fbus.raise_hardware_error(2, HardwareErrorFlags.OVERHEATING)
        await cycles_until(rt, Mode.FAULTED, 50)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert any(
            f.kind is FaultKind.HARDWARE and f.joint == "shoulder_lift" for f in state.faults
        )
        await rt.wait_cycles(2)
        assert feetech_torque(fbus) == [0] * 4 and dxl_torque(dbus) == [0, 0]


def test_hilbot_run_serves_both_buses_virtually(tmp_path: Path):
    data = mixed_data()
    data["urdf"] = str(Path(data["urdf"]))
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(data))
    command = ["run", str(path), "--backend", "virtual", "--enable", "--no-mqtt"]
    done = subprocess.run(
        [sys.executable, "-m", "hilbot", *command, "--duration", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torque off on 6 servos" in done.stdout + done.stderr


def test_the_watchdog_may_stay_on_when_one_bus_has_it():
    check_config(parse_config(mixed_data()))  # no error: the Dynamixel bus uses it
