"""Pose targets over MQTT reach the arm: simulated, and the virtual bus through the real backend."""

import asyncio
import time

import numpy as np
import pytest

from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop import TeleopPublisher

PREFIX = "hilbot/omx"


def ee_position(runtime):
    return runtime.state().poses["arm"][:3, 3].copy()


async def reach(kit, runtime, pub, goal, orientation=None, timeout=15.0):
    """Publish ``goal`` at 50 Hz until the end effector is within 3 mm, or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pub.target("arm", goal, orientation)
        await asyncio.sleep(0.02)
        if np.linalg.norm(ee_position(runtime) - goal) < 0.003:
            return
    error = np.linalg.norm(ee_position(runtime) - goal)
    raise AssertionError(f"end effector {error * 1000:.1f} mm from {goal} after {timeout} s")


async def test_pose_targets_move_the_simulated_arm(kit, mosquitto):
    async with (
        kit.running_sim() as runtime,
        kit.serving(runtime, mosquitto.url),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        start = await pub.chain_position("arm")
        np.testing.assert_allclose(start, ee_position(runtime), atol=1e-5)  # telemetry is right
        await pub.command("enable")
        await kit.eventually(lambda: runtime.mode is Mode.ARMED)
        for offset in ([0.0, 0.03, 0.0], [0.02, 0.0, -0.03]):
            await reach(kit, runtime, pub, start + np.asarray(offset))
        # The tool axis form (this 4-DoF arm has no free roll): point down-ish, reach the position.
        await reach(kit, runtime, pub, start, {"axis": [0.3, 0.0, -1.0]})


async def test_pose_targets_move_the_virtual_bus_arm_through_the_dynamixel_backend(kit, mosquitto):
    async with (
        kit.running_virtual() as runtime,
        kit.serving(runtime, mosquitto.url),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        start = await pub.chain_position("arm")
        await pub.command("enable")
        await kit.eventually(lambda: runtime.mode is Mode.ARMED, timeout=10)
        await reach(kit, runtime, pub, start + np.array([0.0, -0.03, 0.02]))
        assert runtime.state().stats.bus_errors == 0


async def test_the_embedded_broker_and_the_demo_circle_move_the_arm_out_of_the_box(kit):
    settings = kit.fast.model_copy(update={"embedded_port": 0})
    async with kit.running_sim() as runtime:
        start = ee_position(runtime)
        async with kit.serving(runtime, None, settings, isolate=True, demo="circle") as link:
            assert link.url.host == "127.0.0.1" and link.url.port != 0
            await kit.eventually(lambda: runtime.mode is Mode.ARMED, timeout=20)
            # The demo draws a 3 cm circle through the start point: the arm moves away from it.
            await kit.eventually(
                lambda: np.linalg.norm(ee_position(runtime) - start) > 0.01, timeout=20
            )
            async with TeleopPublisher(link.url, PREFIX) as pub:
                state = await pub.chain_position("arm")
                assert np.linalg.norm(state - start) < 0.07  # on the circle, near its start
            # The demo keeps publishing: more targets arrive and are accepted (a busy host may have
            # delivered only a few by the time the arm had moved 1 cm).
            await kit.eventually(lambda: link.counters.accepted > 10, timeout=20)


async def test_the_embedded_broker_reports_a_busy_port(kit, mosquitto):
    from hilbot.driver.teleop import EmbeddedBroker, EmbeddedBrokerError

    with pytest.raises(EmbeddedBrokerError) as info:
        async with EmbeddedBroker(port=mosquitto.port):
            pass
    assert info.value.port == mosquitto.port
    assert "in use" in info.value.problem
