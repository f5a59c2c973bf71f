"""The logic of the LeRobot plugins, without LeRobot: hilbot's runtime on a background thread.

A real runtime on the simulator (and a real mosquitto with ``hilbot teleop`` publishing)
behind LeRobot-style calls: values in LeRobot's units both ways, the motion layer
between the call and the command, faults raised by the next call, a controlled stop at
disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hilbot.driver.dataset.features import features_for
from hilbot.driver.lerobot_bridge import HilbotArm, HilbotLeader, LeRobotUnits, RuntimeFault
from hilbot.driver.runtime.config import load_config
from tests.driver.teleop.conftest import MOSQUITTO, NO_MOSQUITTO, Mosquitto


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.02)


@pytest.mark.parametrize("robot", ["so101_follower", "koch_v1_1_follower", "openmanipulator_x"])
def test_units_round_trip(robot: str) -> None:
    units = LeRobotUnits(features_for(load_config(robot), None))
    joints = {u.joint: 0.5 * (u.lower + u.upper) + 0.2 * (u.upper - u.lower)
              for u in units.features.units}  # fmt: skip
    back = units.to_joints(units.to_lerobot(joints))
    assert back == pytest.approx(joints, abs=1e-9)


def test_send_action_goes_through_the_motion_layer_and_returns_the_command() -> None:
    arm = HilbotArm("so101_follower", "sim")
    assert arm.robot_type == "so_follower"  # LeRobot 0.4's SOFollower.name
    arm.connect()
    try:
        start = arm.observation()
        target = dict(start)
        target["elbow_flex.pos"] += 20.0  # degrees, as LeRobot's SO-101 class
        first = arm.act(target)
        # the first command is a limited step from the hold pose, not the target
        assert abs(first["elbow_flex.pos"] - start["elbow_flex.pos"]) < 5.0
        wait_until(
            lambda: abs(arm.act(target)["elbow_flex.pos"] - target["elbow_flex.pos"]) < 0.05,
            20, "the command reached the target",
        )  # fmt: skip
        wait_until(
            lambda: abs(arm.observation()["elbow_flex.pos"] - target["elbow_flex.pos"]) < 1.0,
            20, "the simulated arm reached the target",
        )  # fmt: skip
        with pytest.raises(ValueError, match=r"gripper\.pos"):
            arm.act({k: v for k, v in target.items() if k != "gripper.pos"})
        with pytest.raises(ValueError, match="finite"):
            arm.act({**target, "wrist_flex.pos": float("nan")})
    finally:
        arm.disconnect()
    assert not arm.connected
    with pytest.raises(RuntimeFault, match="not connected"):
        arm.act(target)


def test_a_fault_of_the_runtime_is_raised_by_the_next_call() -> None:
    from hilbot.driver.runtime.state import Command

    arm = HilbotArm("so101_follower", "sim")
    arm.connect()
    try:
        runtime = arm._runtime
        assert runtime is not None and runtime._loop is not None
        # an e-stop from elsewhere (MQTT, a key) while LeRobot drives it
        asyncio.run_coroutine_threadsafe(
            runtime._runtime.command(Command.ESTOP), runtime._loop
        ).result(10)
        wait_until(lambda: runtime._fault is not None, 10, "the e-stop was seen")
        with pytest.raises(RuntimeFault, match="estopped"):
            arm.act(arm.units.to_lerobot(runtime._snapshot.commands()))  # type: ignore[union-attr]
        with pytest.raises(RuntimeFault, match="estopped"):
            arm.observation()
    finally:
        arm.disconnect()


def test_bad_options_are_one_line_errors() -> None:
    from hilbot.driver.runtime.errors import DriverError

    with pytest.raises(DriverError, match="backend 'usb'"):
        HilbotArm("so101_follower", "usb")
    with pytest.raises(DriverError, match="port is for the hardware and virtual backends"):
        HilbotArm("so101_follower", "sim", port="/dev/ttyACM0")
    with pytest.raises(DriverError, match="source 'phone'"):
        HilbotLeader("so101_follower", "phone")


@contextlib.contextmanager
def mosquitto(folder: Path) -> Iterator[str]:
    """The MQTT tests' real broker (tests/driver/teleop/conftest.py), for this test."""
    if not Path(MOSQUITTO).exists():
        pytest.skip(NO_MOSQUITTO)
    broker = Mosquitto(folder)
    broker.start()
    try:
        yield broker.url
    finally:
        broker.stop()


def test_the_mqtt_source_follows_hilbot_teleop(tmp_path: Path) -> None:
    with mosquitto(tmp_path) as url:
        leader = HilbotLeader("so101_follower", "mqtt", broker=url)
        assert leader.units.keys[0] == "shoulder_pan.pos"
        leader.connect()
        try:
            start = leader.action()
            publisher = subprocess.Popen(
                [sys.executable, "-m", "hilbot", "teleop", "--mqtt", url, "--robot",
                 "so101_follower", "--pattern", "circle", "--radius", "0.04", "--duration", "60"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                wait_until(
                    lambda: max(abs(v - start[k]) for k, v in leader.action().items()) > 2.0,
                    60, "the circle moved the simulated follower's command",
                )  # fmt: skip
            finally:
                publisher.terminate()
                publisher.wait(30)
        finally:
            leader.disconnect()


def test_a_script_that_ends_without_disconnect_still_stops_and_turns_torque_off() -> None:
    # The runtime runs on a daemon thread: without the exit hook the interpreter would kill
    # it mid-cycle, with the servos' torque left on and no controlled stop.
    code = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
        "from hilbot.driver.lerobot_bridge import HilbotArm\n"
        "arm = HilbotArm('so101_follower', 'sim')\n"
        "arm.connect()\n"
        "arm.act(arm.observation())\n"
        "print('connected', flush=True)\n"
        "sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "connected" in done.stdout, done.stderr
    assert "shutdown: torque off" in done.stderr, done.stderr
