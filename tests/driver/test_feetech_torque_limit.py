"""``torque_limit`` in robot configs: Feetech only, the SO-101 pair, the leader's light hold."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from hilbot.driver.lead.leader import prepare_leader
from hilbot.driver.lead.mapping import LeadMap
from hilbot.driver.runtime.backends import dynamixel_backend, virtual_margin_ms
from hilbot.driver.runtime.config import load_config, parse_config
from hilbot.driver.runtime.errors import ConfigError
from hilbot.driver.runtime.validation import check_config
from hilbot.hal.feetech.session import FEETECH_ONLY
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.sim.hand import Hand, move_to
from hilbot.sim.virtual_bus import running_feetech_bus

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


def test_the_so101_follower_caps_its_gripper_at_half_torque() -> None:
    specs = load_config("so101_follower").servo_specs()
    assert [s.torque_limit for s in specs] == [None] * 5 + [0.5]


def test_the_so101_leader_holds_its_trigger_lightly() -> None:
    leader = load_config("so101_leader")
    assert leader.lead is not None and leader.lead.hold is not None
    assert leader.lead.hold.joint == "gripper"
    assert [s.torque_limit for s in leader.servo_specs()] == [None] * 5 + [0.1]


@pytest.mark.parametrize("field", FEETECH_ONLY)
def test_feetech_only_settings_are_refused_on_a_dynamixel_bus(
    field: str, config_data_of: Any
) -> None:
    data = config_data_of("koch_v1_1_follower")
    data["servos"][5][field] = 0.5
    with pytest.raises(ConfigError) as info:
        check_config(parse_config(data))
    assert info.value.loc == ("servos", 5, field)
    assert "is written to Feetech servos at start-up" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.01, float("nan")], ids=str)
def test_a_torque_limit_outside_0_to_1_fails_at_its_field(bad: float, config_data_of: Any) -> None:
    data = config_data_of("so101_follower")
    data["servos"][5]["torque_limit"] = bad
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.loc == ("servos", 5, "torque_limit")


def test_hilbot_refuses_it_on_a_dynamixel_servo_in_one_line(
    config_data_of: Any, write_yaml: Any
) -> None:
    data = config_data_of("koch_v1_1_follower")
    data["servos"][5]["torque_limit"] = 0.5
    path = write_yaml(data)
    done = subprocess.run(
        [sys.executable, "-m", "hilbot", "run", str(path), "--backend", "sim", "--no-mqtt",
         "--duration", "0.1"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "servos[5].torque_limit" in lines[0] and "Feetech" in lines[0], lines[0]


async def test_the_so101_leader_trigger_is_held_lightly_and_the_others_are_limp() -> None:
    leader, follower = load_config("so101_leader"), load_config("so101_follower")
    specs = leader.servo_specs()
    with (
        running_feetech_bus(specs, initial_positions=dict(leader.home), return_delay_time=0) as bus,
        Hand(bus, specs) as hand,
    ):
        backend = dynamixel_backend(leader, {"main": bus.port}, margin_ms=virtual_margin_ms())
        async with backend:  # the real Feetech backend, from the config
            await prepare_leader(backend, LeadMap(leader, follower))
            assert [bus.register(s.id, N.TORQUE_ENABLE) for s in specs] == [0] * 5 + [1]
            assert [bus.register(s.id, N.TORQUE_LIMIT) for s in specs] == [1000] * 5 + [100]
            # A finger squeezes the trigger and moves the wrist: both give way. The leader
            # is read all along, as hilbot lead does (the bus steps its model on each
            # packet; the hand sets the shafts in between).
            pose = {"gripper": 0.8, "wrist_flex": 0.9}
            done = hand.play(move_to(pose, 0.5))
            state = await backend.read()
            end = asyncio.get_running_loop().time() + 1.0
            while not done.is_set() or asyncio.get_running_loop().time() < end:
                state = await backend.read()
                await asyncio.sleep(0.01)
            seen = dict(zip(state.names, state.position, strict=True))
            for joint, value in pose.items():
                assert seen[joint] == pytest.approx(value, abs=0.03), joint
            # The trigger pushes back towards its hold with no more than its limit [%].
            effort = dict(zip(state.names, state.effort, strict=True))
            assert 5.0 <= abs(effort["gripper"]) <= 10.0 + 0.5
        assert bus.errors == []
