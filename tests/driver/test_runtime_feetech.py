"""The full loop through the real FeetechBackend, against the virtual Feetech bus on a pty.

The SO-101 follower config (six STS3215), the runtime and its ticker run unchanged; the
virtual bus (``hilbot.sim.virtual_bus``) serves real FT-SCS packets with the STS3215
memory table, wire timing and the servo dynamics model behind it. The reply margin
comes from the host's scheduling stalls measured just before each run, as for the
Dynamixel tests.
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest

from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, FaultKind
from hilbot.driver.runtime.targets import MAX_JOINT_VALUE
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.feetech.tables import FeetechRegister, FeetechUnits
from hilbot.sim.virtual_bus import FeetechVirtualBus
from tests.driver.conftest import (
    VIRTUAL_RETRIES,
    cycles_until,
    runtime_on,
    virtual_margin_ms,
    wait_at_rest,
)

RATE = 100.0  # modest: the virtual servos share this (busy, 2-core) machine
IDS = range(1, 7)


@pytest.fixture
def config(make_config: Callable[..., RobotConfig]) -> RobotConfig:
    return make_config("so101_follower", chains=[], rate_hz=RATE)


def home_ticks(config: RobotConfig, bus: str | None = None) -> dict[int, int]:
    units = [FeetechUnits.of(s) for s in config.servo_specs(bus)]
    return {u.spec.id: u.ticks(config.home[u.spec.joint]) for u in units}


@pytest.fixture(params=[False, True], ids=["plain", "pipelined"])
def running(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``running(config)``: a virtual Feetech bus at the home pose and a runtime on it.

    Twice: plain, and with the backend pipelined, which must change none of the outcomes.
    """

    @contextlib.asynccontextmanager
    async def run(config: RobotConfig) -> AsyncIterator[tuple[FeetechVirtualBus, Runtime]]:
        margin = virtual_margin_ms(config, VIRTUAL_RETRIES)
        servos = {s.id: s.model for s in config.servo_specs()}
        with FeetechVirtualBus(
            servos, 1_000_000, return_delay_time=0, initial_positions=home_ticks(config)
        ) as vbus:
            async with runtime_on(
                config, {"main": vbus.port}, margin_ms=margin, pipeline=request.param
            ) as rt:
                yield vbus, rt
            assert vbus.errors == []  # the bus server itself never failed

    return run


def torque(vbus: FeetechVirtualBus, servo_id: int) -> int:
    return vbus.register(servo_id, FeetechRegister.TORQUE_ENABLE)


def goals(vbus: FeetechVirtualBus) -> list[int]:
    return [vbus.register(i, FeetechRegister.GOAL_POSITION) for i in IDS]


async def test_tracks_targets_without_a_start_jump_and_shuts_down_torque(config, running):
    async with running(config) as (vbus, rt):
        start = rt.state().joints.positions()
        assert start == pytest.approx(config.home, abs=0.01)
        await rt.wait_cycles(5)
        assert torque(vbus, 1) == 0  # disarmed: torque as found
        await rt.command(Command.ENABLE)
        assert all(torque(vbus, i) == 1 for i in IDS)
        await rt.wait_cycles(3)
        after = rt.state().joints.positions()
        for joint, value in start.items():
            assert after[joint] == pytest.approx(value, abs=0.01)  # no jump
        for _ in range(int(1.5 * RATE)):
            rt.set_joint_targets({"shoulder_pan": 0.4, "elbow_flex": 0.5})
            await rt.wait_cycles(1)
        now = rt.state().joints.positions()
        assert now["shoulder_pan"] == pytest.approx(0.4, abs=0.02)
        assert now["elbow_flex"] == pytest.approx(0.5, abs=0.02)
    assert all(torque(vbus, i) == 0 for i in IDS)


async def test_hostile_targets_stay_inside_the_limits_and_the_max_delta(config, running):
    rng = np.random.default_rng(13)
    seen: list[tuple[np.ndarray, bool]] = []
    async with running(config) as (_vbus, rt):
        rt.add_cycle_listener(lambda r: seen.append((r.command.copy(), r.written)))
        await rt.command(Command.ENABLE)
        names = rt.joint_names
        for i in range(150):
            values = rng.normal(0.0, 3.0, len(names))
            if i % 7 == 0:
                values = np.clip(values * 1e6, -MAX_JOINT_VALUE, MAX_JOINT_VALUE)
            rt.set_joint_targets(dict(zip(names, values, strict=True)))
            await rt.wait_cycles(1)
        lower, upper = rt.limits.lower, rt.limits.upper
        bound = rt.safety.step_bound
        await rt.wait_cycles(3)
        assert rt.state().mode is Mode.ARMED
    written = [c for c, w in seen if w]
    assert len(written) > 100
    for prev, cmd in itertools.pairwise(written):
        assert np.all(cmd >= lower) and np.all(cmd <= upper)
        assert np.all(np.abs(cmd - prev) <= bound + 1e-12)


async def test_watchdog_trips_and_the_servos_are_told_to_hold(make_config, running):
    config = make_config(
        "so101_follower", chains=[], rate_hz=RATE, safety={"watchdog_timeout": 0.1}
    )
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        start = rt.state().command["shoulder_pan"]
        rt.set_joint_targets({"shoulder_pan": start + 1.5})  # far: the velocity limit paces it
        await rt.wait_cycles(int(0.3 * RATE))
        state = rt.state()
        assert state.watchdog_tripped and state.stats.watchdog_trips == 1
        held = (await wait_at_rest(rt))["shoulder_pan"]  # a controlled stop, then a hold
        assert start < held < start + 1.5
        on_bus = goals(vbus)
        await rt.wait_cycles(20)
        assert rt.state().command["shoulder_pan"] == held
        assert goals(vbus) == on_bus
        assert rt.mode is Mode.ARMED


async def test_estop_holds_with_torque_on_until_reset(config, running):
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        start = rt.state().command["shoulder_pan"]
        for _ in range(10):
            rt.set_joint_targets({"shoulder_pan": start + 1.0})
            await rt.wait_cycles(1)
        await rt.command(Command.ESTOP)
        await wait_at_rest(rt)  # a controlled stop from the command, then a hold
        on_bus = goals(vbus)
        for _ in range(20):
            rt.set_joint_targets({"shoulder_pan": start - 1.0})  # ignored while latched
            await rt.wait_cycles(1)
        assert rt.mode is Mode.ESTOPPED
        assert goals(vbus) == on_bus
        assert all(torque(vbus, i) == 1 for i in IDS)  # estop_action: hold
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED
        assert all(torque(vbus, i) == 0 for i in IDS)


async def test_overload_disarms_and_reboot_recovers(config, running):
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        vbus.raise_hardware_error(3, HardwareErrorFlags.OVERLOAD)
        await cycles_until(rt, Mode.FAULTED, 50)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert any(f.kind is FaultKind.HARDWARE and f.joint == "elbow_flex" for f in state.faults)
        await rt.wait_cycles(2)
        assert all(torque(vbus, i) == 0 for i in IDS)
        await rt.command(Command.REBOOT)
        await rt.command(Command.RESET)
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED


async def test_a_servo_unplugged_mid_run_faults_the_bus_and_torque_goes_off(config, running):
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        vbus.fault(4).unplug()
        await cycles_until(rt, Mode.FAULTED, 200)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert any(f.kind is FaultKind.BUS for f in state.faults)
        assert state.stats.bus_errors >= 1
        await rt.wait_cycles(3)
        assert all(torque(vbus, i) == 0 for i in IDS if i != 4)  # the others: off
        vbus.fault(4).replug()
        await rt.wait_cycles(3)


def test_hilbot_run_so101_follower_virtual_with_the_circle_demo():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hilbot",
            "run",
            "so101_follower",
            "--backend",
            "virtual",
            "--enable",
            "--demo",
            "circle",
            "--duration",
            "4",
            # any free port for its embedded broker: 1883 may be taken on a shared host
            # (a broker installed as a service, another run)
            "--broker-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "torque off on 6 servos" in done.stdout + done.stderr


@pytest.mark.parametrize("name", ["so101_circle", "so101_lines"])
async def test_the_so101_scenarios_pass_their_thresholds_on_the_simulator(name, tmp_path):
    from hilbot.driver.bench.backends import BackendKind, ClockKind
    from hilbot.driver.bench.report import write_outputs
    from hilbot.driver.bench.runner import RunOptions, run_bench
    from hilbot.driver.bench.scenario import load_scenario, resolve_scenario
    from hilbot.driver.runtime.config import load_config

    config = load_config("so101_follower")  # the SimBackend takes Feetech models too
    path = resolve_scenario(name)
    scenario = load_scenario(path)
    options = RunOptions(base_dir=path.parent, config_path="so101_follower", clock="fake")
    recording = await run_bench(config, scenario, BackendKind.SIM, ClockKind.FAKE, options)
    outcome = write_outputs(recording, scenario.thresholds, tmp_path)
    assert outcome.passed, outcome


async def test_enable_with_a_glitched_first_reading_does_not_jump(config, running):
    """An STS3215 encoder spike with a valid checksum at enable never becomes the goal."""
    async with running(config) as (vbus, rt):
        present = np.array(list(rt.state().command.values()))
        before = goals(vbus)
        vbus.faults(2).glitch(0.46, unit="rad", replies=1)  # shoulder_lift's next reading
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(20)
        command = np.array(list(rt.state().command.values()))
        after = goals(vbus)
    assert np.abs(command - present).max() < 0.02  # the verified pose: no jump
    assert abs(after[1] - before[1]) <= 20  # its servo holds where it is [ticks]


async def test_estop_at_speed_ignores_a_glitched_reading(config, running):
    async with running(config) as (vbus, rt):
        await rt.command(Command.ENABLE)
        start = rt.state().command["shoulder_pan"]
        for _ in range(int(0.3 * RATE)):  # toward a far target, at speed
            rt.set_joint_targets({"shoulder_pan": start + 1.5})
            await rt.wait_cycles(1)
        moving_at = rt.state().command["shoulder_pan"]
        vbus.faults(1).glitch(-0.46, unit="rad", replies=3)  # readings far behind
        await rt.command(Command.ESTOP)
        hold = (await wait_at_rest(rt))["shoulder_pan"]
    assert hold > moving_at  # went on forward and stopped; never toward the glitch
    report = rt.state().last_stop
    assert report is not None and report.within_bounds
