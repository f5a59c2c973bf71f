"""hilbot lead: a hand-moved leader on a virtual bus drives a follower over MQTT."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from hilbot.driver.lead.leader import lead, prepare_leader
from hilbot.driver.lead.mapping import LeadMap
from hilbot.driver.lead.session import follower
from hilbot.driver.runtime.backends import build_backend, virtual_margin_ms
from hilbot.driver.runtime.config import RobotConfig, load_config, parse_config
from hilbot.driver.runtime.errors import ConfigError
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.teleop.publisher import TeleopPublisher
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.mapping import BusSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.hand import Hand, move_to
from hilbot.sim.virtual_bus import VirtualBus

POSE = {
    "shoulder_pan": 0.3,
    "shoulder_lift": -0.4,
    "elbow_flex": 0.6,
    "wrist_flex": 0.2,
    "wrist_roll": -0.3,
    "gripper": 0.5,
}


def _leader_with(lead: dict[str, object]) -> RobotConfig:
    base = load_config("koch_v1_1_leader")
    data = base.model_dump(mode="json")
    data["lead"] = lead
    return parse_config(data)


def test_the_mapping_scales_offsets_and_maps_the_gripper_range() -> None:
    leader = _leader_with(
        {
            "joints": {
                "shoulder_pan": {"scale": -1.0, "offset": 0.1},
                "gripper": {"range": [0.0, 1.0], "follower_range": [0.2, 1.2]},
                "wrist_roll": None,
            }
        }
    )
    mapping = LeadMap(leader, load_config("koch_v1_1_follower"))
    out = mapping({**POSE, "gripper": 2.0})
    assert out["shoulder_pan"] == pytest.approx(-0.2)
    assert out["gripper"] == pytest.approx(1.2)  # clipped to the follower's range
    assert "wrist_roll" not in out
    assert out["elbow_flex"] == POSE["elbow_flex"]


@pytest.mark.parametrize(
    ("lead", "problem"),
    [
        ({"joints": {"elbow": {}}}, "the leader has no joints"),
        ({"joints": {"gripper": {"to": "jaw"}}}, "has no joint 'jaw'"),
        ({"joints": {"gripper": {"to": "elbow_flex"}}}, "several leader joints drive"),
        ({"hold": {"joint": "trigger"}}, "the leader has no joint 'trigger'"),
    ],
    ids=["unknown leader joint", "unknown follower joint", "two on one", "unknown hold"],
)
def test_bad_lead_sections_are_refused_by_name(lead: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        LeadMap(_leader_with(lead), load_config("koch_v1_1_follower"))


@contextlib.asynccontextmanager
async def _leader_arm(
    config: RobotConfig, buses: list[VirtualBus] | None = None
) -> AsyncIterator[tuple[Hand, DynamixelBackend]]:
    specs = config.servo_specs()
    with (
        running_virtual_bus(specs, initial_positions=dict(config.home), return_delay_time=0) as bus,
        Hand(bus, specs) as hand,
    ):
        if buses is not None:
            buses.append(bus)
        backend = DynamixelBackend(BusSpec(bus.port), specs, margin_ms=virtual_margin_ms())
        async with backend:
            yield hand, backend


async def _settled(runtime: Runtime, targets: dict[str, float], timeout: float) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen: dict[str, float] = {}
    while loop.time() < deadline:
        joints = runtime.state().joints
        if joints is not None:
            seen = joints.positions()
            if all(abs(seen[j] - v) < 0.02 for j, v in targets.items()):
                break
        await asyncio.sleep(0.05)
    return seen


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait until ``predicate()`` holds; fail if it does not within ``timeout`` [s]."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("kind", ["sim", "virtual"])
async def test_lead_moves_the_follower_and_it_holds_when_the_leader_stops(kind: str) -> None:
    leader, follower_config = load_config("koch_v1_1_leader"), load_config("koch_v1_1_follower")
    mapping = LeadMap(leader, follower_config)
    async with (
        build_backend(follower_config, kind) as fbackend,
        follower(follower_config, fbackend) as (runtime, url),
        _leader_arm(leader) as (hand, lbackend),
    ):
        await prepare_leader(lbackend, mapping)
        prefix = follower_config.teleop.topic_prefix(follower_config.name)
        async with TeleopPublisher(url, prefix, settings=follower_config.teleop) as pub:
            # max_silence: the loaded test machine can stall the leader's bus past 1 s
            task = asyncio.create_task(
                lead(lbackend, mapping, pub, leader.rate_hz, max_silence=30.0)
            )
            await asyncio.to_thread(hand.perform, move_to(POSE, 1.0))
            seen = await _settled(runtime, POSE, timeout=60.0)
            for joint, value in POSE.items():
                assert seen[joint] == pytest.approx(value, abs=0.03), joint
            assert runtime.state().mode.value == "armed"
            # The follower's telemetry carries each joint's measured effort (the gripper's
            # current, in A, on the virtual bus).
            await pub.wait_until(lambda p: p.state is not None, timeout=30.0)
            assert pub.state is not None
            joints = pub.state["joints"]
            assert len(joints["effort"]) == len(joints["names"])
            assert all(isinstance(e, float) and math.isfinite(e) for e in joints["effort"])
            if kind == "virtual":
                assert joints["effort_unit"][joints["names"].index("gripper")] == "A"
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            timeout = follower_config.safety.watchdog_timeout
            assert timeout is not None
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout + 30.0
            while not runtime.state().watchdog_tripped and loop.time() < deadline:
                await asyncio.sleep(0.02)
            assert runtime.state().watchdog_tripped
            held = dict(runtime.state().command)
            # It holds the last pose the leader sent, not another one the trip chose.
            for joint, value in POSE.items():
                assert held[joint] == pytest.approx(value, abs=0.03), joint
            # The leader's arm moves on, but nothing reaches the follower: it holds.
            await asyncio.to_thread(hand.perform, move_to({"shoulder_pan": -0.5}, 0.3))
            await asyncio.sleep(0.5)
            assert runtime.state().command == pytest.approx(held)
            still = runtime.state().joints
            assert still is not None
            for joint, value in POSE.items():
                assert still.positions()[joint] == pytest.approx(value, abs=0.03), joint
            assert runtime.state().faults == ()


async def test_a_leader_read_that_fails_for_a_moment_skips_cycles_not_the_lead() -> None:
    leader, follower_config = load_config("koch_v1_1_leader"), load_config("koch_v1_1_follower")
    mapping = LeadMap(leader, follower_config)
    buses: list[VirtualBus] = []
    sent: list[float] = []
    async with (
        build_backend(follower_config, "sim") as fbackend,
        follower(follower_config, fbackend) as (_, url),
        _leader_arm(leader, buses) as (_, lbackend),
    ):
        prefix = follower_config.teleop.topic_prefix(follower_config.name)
        async with TeleopPublisher(url, prefix, settings=follower_config.teleop) as pub:
            # max_silence: the outage below lasts as long as this loaded test machine takes
            # to see it (the default 1 s would end the lead: another behaviour)
            task = asyncio.create_task(
                lead(
                    lbackend,
                    mapping,
                    pub,
                    50.0,
                    on_publish=lambda t, _: sent.append(t),
                    max_silence=30.0,
                )
            )
            await _until(lambda: len(sent) > 5, 30.0, "publishing before the outage")
            buses[0].faults(1).drop_rate = 1.0  # servo 1 stops answering
            # The outage is real: cycles are skipped. Reads in flight when it began may still
            # end well, and a busy host may run those late: a 0.5 s window of at most two
            # publishes must come (a lead still publishing at 50 Hz never shows one).
            await asyncio.sleep(0.2)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20.0
            while True:
                before = len(sent)
                await asyncio.sleep(0.5)
                count = len(sent)
                if count - before <= 2:
                    break
                assert loop.time() < deadline, f"still publishing: {count - before} in 0.5 s"
            buses[0].faults(1).drop_rate = 0.0
            await _until(
                lambda: task.done() or len(sent) > count + 5, 30.0, "publishing after the outage"
            )
            assert not task.done()  # before: the first timeout ended the lead
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("leader", ["koch_v1_1_leader", "so101_leader"])
def test_hilbot_lead_demo_wave_runs_unattended(leader: str, tmp_path: Path) -> None:
    # The follower comes from the leader config's lead.follower. A config folder of its
    # own: a calibration file left in the user's (a demo calibrate of the follower, with
    # its mounts) would apply to these uncalibrated virtual arms and refuse them.
    done = subprocess.run(
        [sys.executable, "-m", "hilbot", "lead", leader, "--backend", "virtual", "--demo",
         "wave", "--duration", "4", "--no-status"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "published" in done.stdout and "follower armed" in done.stdout
    assert "Traceback" not in done.stderr
    timing = re.search(
        r"leader read -> follower goal ([\d.]+) ms median, ([\d.]+) ms p99", done.stdout
    )
    assert timing is not None, done.stdout
    assert 0 < float(timing[1]) <= float(timing[2]) < 4000, done.stdout


async def test_the_follower_is_ready_as_soon_as_its_broker_is() -> None:
    """``follower()`` yields once the broker is up, not when its wait would time out.

    It waited for the serve task too, which never ends: every ``hilbot lead`` without
    ``--mqtt`` sat out the whole 30 s timeout before arming the follower. With a timeout
    of an hour, the old wait would never have returned in this test.
    """
    config = load_config("koch_v1_1_follower")

    async def enter() -> str:
        async with (
            build_backend(config, "sim") as backend,
            follower(config, backend, timeout=3600.0) as (runtime, url),
        ):
            assert runtime.state().mode.value == "armed"
            return str(url)

    url = await asyncio.wait_for(enter(), timeout=120.0)  # idle: about 1 s
    assert url.startswith("mqtt://")


def test_ctrl_c_ends_the_lead_with_its_summary_and_the_follower_torque_off(tmp_path):
    # Ctrl+C at a terminal signals the whole process group: the summary still prints (as
    # --duration's does), the follower's shutdown turns torque off, and the exit code is 130.
    import signal
    import time

    err_path, out_path = tmp_path / "stderr.txt", tmp_path / "stdout.txt"
    args = [sys.executable, "-m", "hilbot", "-v", "lead", "so101_leader", "--backend", "virtual"]
    with err_path.open("wb") as err, out_path.open("wb") as out:
        proc = subprocess.Popen(
            [*args, "--follower-backend", "sim", "--demo", "wave", "--no-status"],
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120  # start-up imports and the bus on a busy host
        while "command enable done" not in err_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.1)
        time.sleep(1.0)  # leading a moment
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    text = err_path.read_text()
    assert code == 130, text
    summary = out_path.read_text().strip().splitlines()
    assert len(summary) == 1 and summary[0].startswith("published "), summary
    assert "shutdown: torque off" in text and "Traceback" not in text
