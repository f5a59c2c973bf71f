"""``--backend sim`` runs each servo's configured motion profile, as the firmware does.

The real backend writes a servo's ``profile_velocity`` / ``profile_acceleration`` (shaft
[rad/s], [rad/s²]) to Profile Velocity / Profile Acceleration, rounded to their units;
the simulated servos behind ``hilbot run --backend sim`` follow the same register values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.ticker import ManualClock
from hilbot.hal.dynamixel.startup import ACCELERATION_UNIT
from hilbot.hal.dynamixel.tables import model
from hilbot.hal.errors import ConfigError
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.sim_backend import SimBackend

VELOCITY_UNIT = model("XM430-W350").rad_per_s_per_velocity_tick
DT = 0.002  # [s] the sampling step


def register_value(value: float, unit: float) -> float:
    """What the firmware runs: the register holds ``round(value / unit)``."""
    return round(value / unit) * unit


def with_profile(make_config: Any, **profiles: dict[str, float]) -> RobotConfig:
    """The OpenManipulator-X config, servos (by joint) given profile settings."""
    config: RobotConfig = make_config("openmanipulator_x")
    servos = [
        {**s.model_dump(exclude_none=True), **profiles.get(s.joint, {})} for s in config.servos
    ]
    return make_config("openmanipulator_x", servos=servos)


async def trace(
    config: RobotConfig, clock: ManualClock, joint: str, target: float, seconds: float
) -> dict[str, np.ndarray]:
    """Step ``joint`` to ``target``; sample the servo's profile and its measured motion."""
    backend = sim_backend(config, clock=clock)
    assert isinstance(backend, SimBackend)
    i = backend.joint_names.index(joint)
    ref_velocity, position, velocity = [], [], []
    async with backend:
        await backend.set_torque(True)
        await backend.write({joint: target})
        for _ in range(round(seconds / DT)):
            clock.advance(DT)
            state = await backend.read()
            ref_velocity.append(float(backend.model.reference_velocity[i]))
            position.append(state.position[i])
            velocity.append(state.velocity[i])
    return {
        "ref_velocity": np.array(ref_velocity),
        "position": np.array(position),
        "velocity": np.array(velocity),
    }


async def test_a_configured_profile_is_followed_within_its_velocity_and_acceleration(
    make_config, clock
):
    config = with_profile(
        make_config, joint2={"profile_velocity": 1.0, "profile_acceleration": 4.0}
    )
    v_max = register_value(1.0, VELOCITY_UNIT)
    a_max = register_value(4.0, ACCELERATION_UNIT)
    start = config.home["joint2"]
    run = await trace(config, clock, "joint2", start + 1.0, seconds=1.6)

    ref = run["ref_velocity"]
    assert ref.max() <= v_max * (1 + 1e-9)  # never above the profile velocity
    assert np.abs(np.diff(ref)).max() / DT <= a_max * (1 + 1e-6)  # nor its acceleration
    assert ref.max() == pytest.approx(v_max)  # it cruises at the profile velocity
    assert ref[round(0.1 / DT) - 1] == pytest.approx(a_max * 0.1, rel=0.02)  # ramps up

    # The shaft follows the profile: it moves no faster than the profile (plus tracking
    # slack) and arrives, after the trapezoid's 1 / v + v / a = 1.25 s.
    assert run["velocity"].max() == pytest.approx(v_max, rel=0.1)
    arrival = 1.0 / v_max + v_max / a_max
    at_half = run["position"][round(arrival / 2 / DT)] - start
    assert at_half == pytest.approx(0.5, abs=0.05)
    assert run["position"][-1] - start == pytest.approx(1.0, abs=0.01)


async def test_without_a_profile_the_servo_steps_as_before(make_config, clock):
    config = make_config("openmanipulator_x")
    start = config.home["joint2"]
    run = await trace(config, clock, "joint2", start + 1.0, seconds=0.6)
    # No profile: the reference jumps at the motor's speed, far above 1 rad/s, and the
    # shaft is there in a fraction of the profiled motion's 1.25 s.
    assert run["ref_velocity"][0] > 4.0
    assert run["velocity"].max() > 3.0
    assert run["position"][round(0.5 / DT)] - start == pytest.approx(1.0, abs=0.01)


async def test_the_profile_is_per_servo_and_in_shaft_units(make_config, clock):
    # The gripper's servo turns 66.67 rad per metre: 2 rad/s on its shaft is 30 mm/s.
    config = with_profile(make_config, gripper={"profile_velocity": 2.0})
    backend = sim_backend(config, clock=clock)
    assert isinstance(backend, SimBackend)
    profile = dict(zip(backend.joint_names, backend.model.profile_velocity, strict=True))
    assert profile["gripper"] == pytest.approx(register_value(2.0, VELOCITY_UNIT))
    assert [profile[j] for j in ("joint1", "joint2", "joint3", "joint4")] == [0.0] * 4
    assert backend.model.profile_acceleration.tolist() == [0.0] * 5
    run = await trace(config, clock, "gripper", 0.01, seconds=0.8)
    speed = register_value(2.0, VELOCITY_UNIT) / 66.6667
    assert run["velocity"].max() == pytest.approx(speed, rel=0.1)


async def test_a_reboot_keeps_the_configured_profile(make_config, clock):
    # The real backend writes the config's profiles again after a reboot.
    config = with_profile(make_config, joint1={"profile_velocity": 1.0})
    backend = sim_backend(config, clock=clock)
    assert isinstance(backend, SimBackend)
    async with backend:
        await backend.reboot(["joint1"])
        assert backend.model.profile_velocity[0] == pytest.approx(
            register_value(1.0, VELOCITY_UNIT)
        )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ServoSpec(3, "AX-12A", "a", profile_velocity=1.0), "no Profile Velocity register"),
        (ServoSpec(3, "STS3215", "a", profile_acceleration=2.0), "no Profile Acceleration"),
        (ServoSpec(3, "XM430-W350", "a", profile_velocity=math.pi * 300), "outside 0..32767"),
    ],
    ids=["protocol-1", "feetech", "out-of-range"],
)
def test_a_profile_the_servo_cannot_run_is_refused_in_one_line(clock, spec, message):
    with pytest.raises(ConfigError, match=message) as info:
        SimBackend([spec], clock=clock)
    assert info.value.servo_id == 3
    assert "\n" not in str(info.value)
