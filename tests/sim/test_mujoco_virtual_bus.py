"""Physics behind the wire: the real Dynamixel backend drives a MuJoCo body on a virtual bus."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("mujoco", reason="the mujoco extra is not installed")

from hilbot.driver.runtime.backends import (
    dynamixel_backend,
    mujoco_backend,
    virtual_buses,
)
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.validation import load_robot
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.mapping import BusSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.mujoco_body import body_model_factory

# The machine running the tests is shared and busy: replies may be late by this much.
MARGIN_MS = 100.0
LEANING = {"joint1": 0.0, "joint2": 0.9, "joint3": -0.6, "joint4": 0.0, "gripper": 0.0}


@pytest.fixture(scope="module")
def config():
    return load_config("openmanipulator_x")


async def _expected_current(config) -> float:
    """joint2's holding current in the in-process MuJoCo backend, after 2 s."""

    class Clock:
        t = 0.0

        def __call__(self) -> float:
            return self.t

    clock = Clock()
    async with mujoco_backend(config, clock=clock, initial_positions=LEANING) as b:
        await b.set_torque(True)
        for _ in range(400):
            clock.t += 0.005
            state = await b.read()
        return float(state.effort[state.names.index("joint2")])


async def _settled_current(backend) -> tuple[float, float]:
    """(joint2 current [A], position [rad]) after holding torque on for 2 s of wall time."""
    async with backend:
        await backend.set_torque(True)
        await asyncio.sleep(2.0)
        state = await backend.read()
        i = state.names.index("joint2")
        return float(state.effort[i]), float(state.position[i])


async def test_the_real_backend_reads_the_gravity_load_through_the_wire(config):
    servos = config.servo_specs("main")
    expected = await _expected_current(config)
    assert abs(expected) > 0.2
    factory = body_model_factory(load_robot(config.urdf), servos, home=LEANING)
    with running_virtual_bus(
        servos, initial_positions=LEANING, return_delay_time=0, model_factory=factory
    ) as vbus:
        backend = DynamixelBackend(BusSpec(vbus.port, 1_000_000, 2), servos, margin_ms=MARGIN_MS)
        current, position = await _settled_current(backend)
    # Present Current is in 2.69 mA units on the XM430: a few of them of quantization
    assert current == pytest.approx(expected, rel=0.1, abs=0.02)
    assert position == pytest.approx(0.9, abs=0.02)
    with running_virtual_bus(servos, initial_positions=LEANING, return_delay_time=0) as plain:
        backend = DynamixelBackend(BusSpec(plain.port, 1_000_000, 2), servos, margin_ms=MARGIN_MS)
        current, _ = await _settled_current(backend)
    assert abs(current) < 0.05  # no body behind the plain bus


async def test_sim_bus_physics_mujoco_in_its_own_process(config):
    """``hilbot sim-bus ROBOT --physics mujoco`` as ``hilbot run --backend virtual`` starts it."""
    async with virtual_buses(
        config, return_delay_time=0, extra_args=("--physics", "mujoco")
    ) as ports:
        backend = dynamixel_backend(config, ports, margin_ms=MARGIN_MS)
        async with backend:
            await backend.set_torque(True)
            await backend.write({"joint2": 0.6, "joint3": -0.3})
            await asyncio.sleep(2.0)
            state = await backend.read()
    i = state.names.index("joint2")
    assert state.position[i] == pytest.approx(0.6, abs=0.03)
    assert abs(state.effort[i]) > 0.1  # leaning forward against gravity


async def test_sim_bus_physics_mujoco_behind_a_feetech_bus():
    """The SO-101 on its virtual Feetech bus, the real Feetech backend reading the load."""
    config = load_config("so101_follower")
    results = {}
    for extra in ((), ("--physics", "mujoco")):
        async with virtual_buses(config, return_delay_time=0, extra_args=extra) as ports:
            backend = dynamixel_backend(config, ports, margin_ms=MARGIN_MS)
            async with backend:
                await backend.set_torque(True)
                # home is -0.8; forwards (+) swings the arm down towards the floor
                await backend.write({"shoulder_lift": -0.4})
                await asyncio.sleep(2.0)
                state = await backend.read()
        i = state.names.index("shoulder_lift")
        results[bool(extra)] = (float(state.position[i]), abs(float(state.effort[i])))
    (plain_q, plain_load), (body_q, body_load) = results[False], results[True]
    assert plain_q == pytest.approx(-0.4, abs=0.03) and body_q == pytest.approx(-0.4, abs=0.05)
    assert body_load > plain_load + 1.0  # the links' weight on the shoulder [% of stall]
