"""hilbot calibrate on the virtual bus: the hand moves an arm with known assembly errors."""

from __future__ import annotations

import asyncio
import io
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hilbot.driver.calibration import files
from hilbot.driver.calibration.apply import (
    CalibrationMismatch,
    calibrated_config,
    check_fresh,
    stale_joints,
)
from hilbot.driver.calibration.dynamixel_access import DynamixelAccess, dynamixel_access
from hilbot.driver.calibration.flow import CalibrationError, check_servos, measure, result
from hilbot.driver.calibration.flow import write_servos as write_to_servos
from hilbot.driver.calibration.guides import HandGuide
from hilbot.driver.commands.calibrate import demo_ranges
from hilbot.driver.commands.sim_bus import joint_ranges
from hilbot.driver.runtime.backends import virtual_margin_ms
from hilbot.driver.runtime.config import RobotConfig, load_config
from hilbot.hal.calibration import Calibration
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.hand import Hand
from hilbot.sim.mounting import Mounting, mounted
from hilbot.sim.virtual_bus import VirtualBus
from tests.driver.conftest import DemoCalibration

TICK = 2 * math.pi / 4096
#: The arm as assembled: the shoulder horn 11.5° off, the elbow servo 23° off and turned around.
MOUNTS = {2: Mounting(-0.2), 3: Mounting(0.4, reversed=True)}


@dataclass
class Arm:
    config: RobotConfig
    true: tuple[ServoSpec, ...]
    bus: VirtualBus
    hand: Hand
    access: DynamixelAccess
    ranges: dict[str, tuple[float, float]]

    def guide(self) -> HandGuide:
        return HandGuide(self.hand, self.ranges, stream=io.StringIO(), seconds=0.4)


@pytest.fixture
def arm() -> Iterator[Arm]:
    config = load_config("koch_v1_1_follower")
    true = mounted(config.servo_specs(), MOUNTS)
    vbus = running_virtual_bus(true, initial_positions=dict(config.home), return_delay_time=0)
    with vbus as bus, Hand(bus, true) as hand:
        with dynamixel_access(BusSpec(bus.port), margin_ms=virtual_margin_ms()) as access:
            yield Arm(config, true, bus, hand, access, demo_ranges(joint_ranges(config)))
        assert bus.errors == []


async def _calibrate(arm: Arm, *, write: bool = False) -> Calibration:
    joints, seen = await measure(arm.config, arm.access, arm.guide())
    homing = await write_to_servos(arm.access, joints, seen) if write else None
    return result(arm.config, joints, seen, "virtual", homing)


async def _track(arm: Arm, calibration: Calibration, targets: dict[str, float]) -> None:
    """Drive the calibrated backend to ``targets`` and check where the arm really is."""
    specs = calibration.apply(arm.config.servo_specs())
    async with DynamixelBackend(BusSpec(arm.bus.port), specs, margin_ms=virtual_margin_ms()) as be:
        await be.set_torque(True)
        await be.write(targets)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30.0
        while loop.time() < deadline:
            seen = (await be.read()).positions()
            if all(abs(seen[j] - v) < 0.02 for j, v in targets.items()):
                break
            await asyncio.sleep(0.05)
        real = arm.hand.joint_positions()  # before torque goes off and the hand takes over
    for joint, value in targets.items():
        assert real[joint] == pytest.approx(value, abs=0.03), joint


class OneAtATime:
    """The real access, noting when a reading starts and whether two ever overlap."""

    def __init__(self, access: DynamixelAccess) -> None:
        self.access = access
        self.reading = threading.Event()  # a reading is on the bus now
        self.busy = 0
        self.overlaps = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.access, name)

    def present_ticks(self, servo_ids: Sequence[int]) -> dict[int, int]:
        with self._lock:
            self.busy += 1
            self.overlaps += self.busy > 1
        self.reading.set()
        try:
            time.sleep(0.05)  # a reading that takes a while: the next step starts meanwhile
            return self.access.present_ticks(servo_ids)
        finally:
            with self._lock:
                self.busy -= 1
            self.reading.clear()


async def test_step_2_ends_only_after_its_last_reading(arm: Arm) -> None:
    # Enter at step 2 while the live line's reading is on the bus: its thread must end
    # before step 3 reads (two threads on one port: one finds it readable and empty).
    access = OneAtATime(arm.access)
    guide = arm.guide()

    async def full_range(joints: Sequence[str]) -> None:
        await asyncio.to_thread(access.reading.wait, 30.0)  # Enter during a reading

    guide.full_range = full_range  # type: ignore[method-assign]
    joints, seen = await measure(arm.config, access, guide)  # type: ignore[arg-type]
    assert access.overlaps == 0
    # and step 3 still measured every joint's direction, the reversed elbow included
    calibration = result(arm.config, joints, seen, "virtual", None)
    assert {s.joint: calibration.joints[s.joint].direction for s in arm.true} == {
        s.joint: s.direction for s in arm.true
    }
    assert calibration.joints["elbow_flex"].direction == -1


async def test_the_hand_calibration_finds_the_assembly_errors(arm: Arm) -> None:
    calibration = await _calibrate(arm)
    for spec in arm.true:
        cal = calibration.joints[spec.joint]
        assert cal.direction == spec.direction, spec.joint
        assert cal.offset == pytest.approx(spec.offset, abs=3 * TICK), spec.joint
        lower, upper = arm.ranges[spec.joint]
        assert cal.range == pytest.approx((lower, upper), abs=0.03), spec.joint
        assert cal.homing_offset is None
    assert calibration.joints["elbow_flex"].direction == -1  # the reversed one
    # A run with it tracks targets in the calibrated (the true) joint frame.
    await _track(arm, calibration, {"shoulder_lift": 0.4, "elbow_flex": -0.5, "wrist_flex": 0.3})


async def test_write_servos_puts_homing_and_limits_in_eeprom(arm: Arm) -> None:
    calibration = await _calibrate(arm, write=True)
    for spec in arm.true:
        cal = calibration.joints[spec.joint]
        assert cal.offset == pytest.approx(0.0, abs=TICK)  # the middle pose reads center
        assert arm.bus.register(spec.id, RegisterName.HOMING_OFFSET) == cal.homing_offset
        low = arm.bus.register(spec.id, RegisterName.MIN_POSITION_LIMIT)
        high = arm.bus.register(spec.id, RegisterName.MAX_POSITION_LIMIT)
        ends = sorted(cal.direction * (t - 2048) * TICK for t in (low, high))
        assert ends == pytest.approx([cal.lower, cal.upper], abs=2 * TICK), spec.joint
    assert calibration.joints["shoulder_lift"].homing_offset == -round(0.2 / TICK)
    await _track(arm, calibration, {"shoulder_lift": -0.3, "elbow_flex": 0.6})


async def test_a_wrapped_joint_makes_the_calibration_stale(arm: Arm) -> None:
    calibration = await _calibrate(arm)
    specs = calibration.apply(arm.config.servo_specs())
    config = calibrated_config(arm.config, calibration)
    bus_spec = BusSpec(arm.bus.port)
    async with DynamixelBackend(bus_spec, specs, margin_ms=virtual_margin_ms()) as be:
        fresh = await be.read()
    assert stale_joints(fresh, calibration, 0.15) == []
    # A multi-turn wrap: the wrist reads a whole turn off (Homing Offset one turn on).
    reg = DynamixelAccess(arm.access._bus)._spec(4).register(RegisterName.HOMING_OFFSET)
    arm.access._bus.write(4, reg.address, reg.encode(4096))
    async with DynamixelBackend(bus_spec, specs, margin_ms=virtual_margin_ms()) as be:
        wrapped = await be.read()
        with pytest.raises(CalibrationMismatch, match=r"wrist_flex reads .*calibrate"):
            check_fresh(wrapped, calibration, config, "virtual")
        assert not arm.bus.model.torque_enabled.any()  # nothing was enabled


async def test_a_missing_or_different_servo_is_named(arm: Arm) -> None:
    specs = list(arm.config.servo_specs())
    specs[1] = ServoSpec(2, "XM430-W350", "shoulder_lift")
    specs.append(ServoSpec(9, "XL330-M288", "extra"))
    with pytest.raises(CalibrationError, match=r"servo 2 \(shoulder_lift\) is a XL430-W250.*"):
        await check_servos(arm.access, specs)
    with pytest.raises(CalibrationError, match=r"servo 9 \(extra\) does not answer"):
        await check_servos(arm.access, specs)


def test_calibrated_config_tightens_limits_and_refuses_another_robot(tmp_path: Path) -> None:
    config = load_config("koch_v1_1_follower")
    data = yaml.safe_load(
        """
        format: 1
        robot: koch_v1_1_follower
        port: ttyACM0
        joints: {}
        """
    )
    data["joints"] = {
        j: {"servo_id": s.id, "offset": 0.1, "direction": -1, "range": [-0.5, 0.5]}
        for j, s in zip(config.joint_names, config.servo_specs(), strict=True)
    }
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(data))
    calibration = files.load(path)
    files.save(calibration, tmp_path / "again.yaml")
    assert files.load(tmp_path / "again.yaml") == calibration
    out = calibrated_config(config, calibration)
    assert all(s.direction == -1 and s.offset == 0.1 for s in out.servos)
    assert out.safety.soft_limits["elbow_flex"] == pytest.approx((-0.495, 0.495))
    data["robot"] = "other"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CalibrationMismatch, match="of 'other'"):
        calibrated_config(config, files.load(path))
    data["joints"]["gripper"]["direction"] = 2
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(files.CalibrationFileError, match=r"joints.gripper: direction"):
        files.load(path)


def _hilbot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def test_demo_then_run_applies_it_and_refuses_a_reassembled_arm(
    tmp_path: Path, demo_calibration: Callable[[str], DemoCalibration]
) -> None:
    done = demo_calibration("koch_v1_1_follower")  # made once per test run
    assert "(reversed vs config)" in done.stdout
    env = {"XDG_CONFIG_HOME": str(done.copy(tmp_path / "home"))}
    saved = files.load(done.file)
    assert saved.joints["elbow_flex"].direction == -1
    mounts = ["--mount", "2:-12", "--mount", "3:25:reversed"]
    run = ["run", "koch_v1_1_follower", "--backend", "virtual", "--no-mqtt", "--no-status"]
    same = _hilbot(*run, *mounts, "--duration", "1", "--enable", env=env)
    assert same.returncode == 0, same.stderr
    moved = _hilbot(*run, "--mount", "2:-12", "--mount", "3:-60:reversed", "--enable", env=env)
    assert moved.returncode == 2
    assert "elbow_flex reads" in moved.stderr and "hilbot calibrate" in moved.stderr
    assert "Traceback" not in moved.stderr


def test_a_required_calibration_refuses_to_run_without_one(tmp_path: Path) -> None:
    from hilbot.configs import config_path

    source = config_path("koch_v1_1_follower")
    data = yaml.safe_load(source.read_text())
    data["urdf"] = str(source.parent / data["urdf"])
    data["calibration"] = "required"
    robot = tmp_path / "koch_required.yaml"
    robot.write_text(yaml.safe_dump(data))
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    done = _hilbot("run", str(robot), "--backend", "virtual", "--no-mqtt", "--enable", env=env)
    assert done.returncode == 2
    assert "must be calibrated" in done.stderr
    assert f"hilbot calibrate {robot} --backend virtual --demo" in done.stderr


@pytest.mark.parametrize("write", [False, True], ids=["file only", "write servos"])
async def test_the_so101_on_a_feetech_bus_calibrates_the_same_way(write: bool) -> None:
    from hilbot.driver.calibration.feetech_access import feetech_access
    from hilbot.hal.feetech.tables import FeetechRegister
    from hilbot.sim.virtual_bus import running_feetech_bus

    config = load_config("so101_follower")
    true = mounted(config.servo_specs(), MOUNTS)
    ranges = demo_ranges(joint_ranges(config))
    vbus = running_feetech_bus(true, initial_positions=dict(config.home), return_delay_time=0)
    models = {s.id: s.model for s in true}
    with (
        vbus as bus,
        Hand(bus, true) as hand,
        feetech_access(bus.port, 1_000_000, models, margin_ms=virtual_margin_ms()) as access,
    ):
        guide = HandGuide(hand, ranges, stream=io.StringIO(), seconds=0.4)
        joints, seen = await measure(config, access, guide)
        homing = await write_to_servos(access, joints, seen) if write else None
        calibration = result(config, joints, seen, "virtual", homing)
        if write:
            # Feetech's Ofs is subtracted: the shoulder, 0.2 rad off, gets +0.2 rad of steps.
            assert bus.register(2, FeetechRegister.HOMING_OFFSET) == round(0.2 / TICK)
    for spec in true:
        cal = calibration.joints[spec.joint]
        assert cal.direction == spec.direction, spec.joint
        assert cal.offset == pytest.approx(0.0 if write else spec.offset, abs=3 * TICK)
        assert cal.range == pytest.approx(ranges[spec.joint], abs=0.03), spec.joint


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--backend", "virtual"], "needs --demo"),
        (["--demo"], "--backend virtual only"),
        (["--mount", "2:10"], "--mount sets up the virtual servos"),
        (["--backend", "virtual", "--demo", "--port", "/dev/x"], "--port is for"),
        (["--out", "/no/such/folder/cal.yaml"], "does not exist"),
        (["--backend", "virtual", "--demo", "--mount", "2:abc"], "not a number of degrees"),
    ],
    ids=["virtual without demo", "demo on hardware", "mount", "port", "out", "bad mount"],
)
def test_bad_calibrate_options_are_one_line(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from hilbot.driver.cli import main

    assert main(["calibrate", "koch_v1_1_follower", *argv]) == 2
    err = capsys.readouterr().err
    assert problem in err and err.count("\n") == 1 and "Traceback" not in err
