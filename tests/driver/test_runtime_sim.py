"""The full control loop on the simulated backend, on a manual clock (fast, deterministic)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilbot.driver.runtime.errors import (
    InvalidTarget,
    LimitViolation,
    RuntimeStateError,
    UnknownChain,
    UnknownJoint,
)
from hilbot.driver.runtime.loop import SHUTDOWN_TORQUE_TRIES, Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command, CycleRecord, FaultKind
from hilbot.driver.runtime.targets import MAX_JOINT_VALUE
from hilbot.driver.runtime.ticker import ManualClock
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.sim.sim_backend import SimBackend

RATE = 200.0


@pytest.fixture
def joints_config(make_config):
    def make(**changes):
        changes.setdefault("chains", [])
        changes.setdefault("rate_hz", RATE)
        return make_config("openmanipulator_x", **changes)

    return make


class Recorder:
    """Keeps a copy of what every cycle wrote."""

    def __init__(self) -> None:
        self.commands: list[np.ndarray] = []
        self.written: list[bool] = []
        self.modes: list[Mode] = []

    def __call__(self, rec: CycleRecord) -> None:
        self.commands.append(rec.command.copy())
        self.written.append(rec.written)
        self.modes.append(rec.mode)


async def test_starts_disarmed_holds_and_never_writes(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    rec = Recorder()
    async with Runtime(config, backend, clock=clock) as rt:
        rt.add_cycle_listener(rec)
        start = rt.state().joints.position.copy()
        rt.set_joint_targets({"joint1": 1.0})  # ignored: not armed
        await rt.wait_cycles(50)
        state = rt.state()
        assert state.mode is Mode.DISARMED
        np.testing.assert_allclose(state.joints.position, start, atol=1e-3)
        assert not any(rec.written)
        assert not backend.model.torque_enabled.any()


async def test_enable_makes_no_jump_and_tracks_joint_targets(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    rec = Recorder()
    async with Runtime(config, backend, clock=clock) as rt:
        rt.add_cycle_listener(rec)
        present = rt.state().joints.position.copy()
        await rt.command(Command.ENABLE)
        assert backend.model.torque_enabled.all()
        await rt.wait_cycles(1)
        # The first command is the present pose (clipped into the limits): no jump.
        np.testing.assert_allclose(rec.commands[-1], present, atol=1e-9)
        for _ in range(300):
            rt.set_joint_targets({"joint1": 0.8, "joint2": -0.6})
            await rt.wait_cycles(1)
        state = rt.state()
        assert state.mode is Mode.ARMED
        assert state.command["joint1"] == pytest.approx(0.8)
        assert state.joints.positions()["joint1"] == pytest.approx(0.8, abs=0.01)
        assert state.joints.positions()["joint2"] == pytest.approx(-0.6, abs=0.01)
        # the far target was reached by a limited motion: the safety layer never clamped
        assert sum(state.clamp_counts.values()) == 0


async def test_hostile_targets_never_exceed_limits_or_max_delta(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    rng = np.random.default_rng(7)
    seen: list[tuple[np.ndarray, bool]] = []
    async with Runtime(config, backend, clock=clock) as rt:
        rt.add_cycle_listener(lambda r: seen.append((r.command.copy(), r.written)))
        await rt.command(Command.ENABLE)
        names = rt.joint_names
        for i in range(600):
            values = rng.normal(0.0, 3.0, len(names))
            if i % 7 == 0:  # absurdly far, as far as the door lets through
                values = np.clip(values * 1e6, -MAX_JOINT_VALUE, MAX_JOINT_VALUE)
            rt.set_joint_targets(dict(zip(names, values, strict=True)))
            await rt.wait_cycles(1)
        lower, upper = rt.limits.lower, rt.limits.upper
        bound = rt.safety.step_bound
    written = [c for c, w in seen if w]
    assert len(written) > 500
    for prev, cmd in itertools.pairwise(written):
        assert np.all(cmd >= lower) and np.all(cmd <= upper)
        assert np.all(np.abs(cmd - prev) <= bound + 1e-12)


async def test_bad_targets_are_refused_at_once(sim_factory, clock, joints_config):
    config = joints_config()
    async with Runtime(config, sim_factory(config), clock=clock) as rt:
        with pytest.raises(UnknownChain) as err:
            rt.set_target("nope", (0.1, 0.0, 0.1))
        assert err.value.chain == "nope"
        with pytest.raises(UnknownJoint) as jerr:
            rt.set_joint_targets({"joint9": 0.0})
        assert jerr.value.joint == "joint9" and "joint1" in jerr.value.known
        with pytest.raises(InvalidTarget):
            rt.set_joint_targets({"joint1": float("nan")})
        with pytest.raises(InvalidTarget):
            rt.set_joint_targets({"joint1": "up"})  # type: ignore[dict-item]


async def test_watchdog_trips_and_holds(sim_factory, clock, joints_config):
    config = joints_config(safety={"watchdog_timeout": 0.1})
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        start = rt.state().command["joint1"]
        rt.set_joint_targets({"joint1": start + 2.0})  # far: needs ~0.5 s at the velocity limit
        await rt.wait_cycles(int(0.3 * RATE))
        state = rt.state()
        assert state.watchdog_tripped
        assert state.stats.watchdog_trips == 1
        # moved for ~0.1 s, then a controlled stop from the command brought it to rest
        for _ in range(int(RATE)):
            if all(v == 0.0 for v in rt.state().velocity.values()):
                break
            await rt.wait_cycles(1)
        held = rt.state().command["joint1"]
        assert start < held < start + 2.0
        await rt.wait_cycles(40)
        assert rt.state().command["joint1"] == held
        rt.set_joint_targets({"joint1": start + 2.0})  # a fresh target resumes
        await rt.wait_cycles(5)
        assert rt.state().command["joint1"] > held
        assert not rt.state().watchdog_tripped


async def test_estop_latches_until_reset(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        for _ in range(20):
            rt.set_joint_targets({"joint1": 1.0})
            await rt.wait_cycles(1)
        await rt.command(Command.ESTOP)
        assert rt.mode is Mode.ESTOPPED
        for _ in range(40):
            rt.set_joint_targets({"joint1": -1.0})  # ignored while latched
            await rt.wait_cycles(1)
        held = rt.state().command["joint1"]
        assert held > 0.0
        assert backend.model.torque_enabled.all()  # estop_action: hold
        with pytest.raises(RuntimeStateError) as err:
            await rt.command(Command.ENABLE)
        assert err.value.mode == "estopped"
        await rt.command(Command.DISABLE)
        assert rt.mode is Mode.ESTOPPED  # disable does not clear the latch
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED


async def test_estop_torque_off(sim_factory, clock, joints_config):
    config = joints_config(safety={"estop_action": "torque_off"})
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.command(Command.ESTOP)
        assert not backend.model.torque_enabled.any()
        await rt.wait_cycles(5)
        assert rt.mode is Mode.ESTOPPED


@pytest.mark.parametrize(
    "flag", [HardwareErrorFlags.OVERLOAD, HardwareErrorFlags.OVERHEATING], ids=lambda f: f.name
)
async def test_servo_fault_disarms_and_reboot_recovers(flag, sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(5)
        backend.fault("joint2").hardware_error = flag
        await rt.wait_cycles(5)
        state = rt.state()
        assert state.mode is Mode.FAULTED
        (fault,) = state.faults
        assert (fault.kind, fault.joint) == (FaultKind.HARDWARE, "joint2")
        assert flag.describe() in fault.detail
        assert not backend.model.torque_enabled.any()  # disarmed: every servo, not just joint2
        with pytest.raises(RuntimeStateError):
            await rt.command(Command.ENABLE)
        with pytest.raises(RuntimeStateError) as err:
            await rt.command(Command.RESET)  # the error is still latched
        assert "reboot" in err.value.reason
        await rt.command(Command.REBOOT)
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED and not rt.state().faults
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED


async def test_input_voltage_error_is_reported_without_disarming(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        backend.fault("joint3").hardware_error = HardwareErrorFlags.INPUT_VOLTAGE
        await rt.wait_cycles(5)
        state = rt.state()
        assert state.mode is Mode.ARMED  # the firmware does not shut down on it either
        (fault,) = state.faults
        assert (fault.joint, fault.detail) == ("joint3", "input voltage")
        await rt.wait_cycles(20)
        assert rt.mode is Mode.ARMED and len(rt.state().faults) == 1  # latched, reported once
        await rt.command(Command.DISABLE)
        await rt.command(Command.REBOOT)  # clears the latched bit
        assert not rt.state().faults


async def test_shutdown_disables_torque(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        assert backend.model.torque_enabled.all()
    assert not backend.model.torque_enabled.any()


async def test_shutdown_on_exception_disables_torque(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    with pytest.raises(ZeroDivisionError):
        async with Runtime(config, backend, clock=clock) as rt:
            await rt.command(Command.ENABLE)
            1 / 0  # noqa: B018
    assert not backend.model.torque_enabled.any()


async def test_shutdown_retries_torque_off_a_bounded_number_of_times(
    sim_factory, clock, joints_config, caplog
):
    config = joints_config()
    backend = sim_factory(config, retries=0)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(3)
        backend.fault("joint3").drop_rate = 1.0  # servo 13 no longer answers
    retries = [r for r in caplog.records if "disabling torque failed, retrying" in r.getMessage()]
    assert len(retries) == SHUTDOWN_TORQUE_TRIES - 1
    assert f"could not disable torque ({SHUTDOWN_TORQUE_TRIES} attempts)" in caplog.text
    assert "shutdown: torque off" not in [r.getMessage() for r in caplog.records]


async def test_torque_left_on_when_configured(sim_factory, clock, joints_config):
    config = joints_config(safety={"torque_off_on_shutdown": False})
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
    assert backend.model.torque_enabled.all()


async def test_bus_fault_mid_run_is_survived_and_reported(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config, retries=0)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(10)
        backend.fault("joint3").drop_rate = 1.0  # every reply from servo 13 lost
        await rt.wait_cycles(10)  # 50 ms: shorter than the bus-down time
        backend.fault("joint3").drop_rate = 0.0
        await rt.wait_cycles(10)
        state = rt.state()
        assert state.mode is Mode.ARMED
        assert state.stats.bus_errors >= 10
        assert any(f.kind is FaultKind.BUS for f in state.fault_log)
        assert not state.faults  # recovered
        rt.set_joint_targets({"joint1": 0.3})
        await rt.wait_cycles(100)
        assert rt.state().joints.positions()["joint1"] == pytest.approx(0.3, abs=0.01)


async def test_bus_down_faults(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config, retries=0)
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        backend.fault("joint1").unplug()
        await rt.wait_cycles(int(0.5 * RATE))
        state = rt.state()
        assert state.mode is Mode.FAULTED
        assert any(f.kind is FaultKind.BUS for f in state.faults)
        rt.set_joint_targets({"joint2": 0.5})  # ignored: faulted
        # The simulated sync write fails while a servo is missing; torque-off is retried
        # every cycle and goes through as soon as the bus answers again.
        backend.fault("joint1").replug()
        await rt.wait_cycles(5)
        assert not backend.model.torque_enabled.any()
        assert rt.mode is Mode.FAULTED and not rt.state().faults  # the bus is back; latched
        await rt.command(Command.RESET)
        await rt.command(Command.ENABLE)
        assert rt.mode is Mode.ARMED and backend.model.torque_enabled.all()


async def test_enable_refused_far_outside_limits(sim_factory, clock, joints_config):
    config = joints_config(safety={"soft_limits": {"joint1": [0.5, 1.0]}}, home={})
    backend = sim_factory(config, initial_positions={"joint1": 0.0})
    async with Runtime(config, backend, clock=clock) as rt:
        with pytest.raises(LimitViolation) as err:
            await rt.command(Command.ENABLE)
        assert err.value.joint == "joint1" and err.value.lower == pytest.approx(0.5)
        assert rt.mode is Mode.DISARMED
        assert not backend.model.torque_enabled.any()


async def test_home_moves_to_the_home_pose(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config, initial_positions={"joint1": 0.5})
    async with Runtime(config, backend, clock=clock) as rt:
        with pytest.raises(RuntimeStateError):
            await rt.command(Command.HOME)  # not armed
        await rt.command(Command.ENABLE)
        await rt.command("home")
        await rt.wait_cycles(int(1.5 * RATE))  # homing is exempt from the watchdog
        state = rt.state()
        assert state.homing
        for joint, value in config.home.items():
            assert state.joints.positions()[joint] == pytest.approx(value, abs=0.02)


async def test_targets_sent_before_enable_are_dropped(sim_factory, clock, joints_config):
    config = joints_config()
    backend = sim_factory(config)
    async with Runtime(config, backend, clock=clock) as rt:
        start = rt.state().command["joint1"]
        rt.set_joint_targets({"joint1": start + 1.0})
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(20)
        assert rt.state().command["joint1"] == pytest.approx(start, abs=1e-9)


async def test_unknown_command_is_refused(sim_factory, clock, joints_config):
    config = joints_config()
    async with Runtime(config, sim_factory(config), clock=clock) as rt:
        with pytest.raises(ValueError, match="fly"):
            await rt.command("fly")


async def test_stats_count_cycles(sim_factory, clock, joints_config):
    config = joints_config()
    async with Runtime(config, sim_factory(config), clock=clock) as rt:
        await rt.wait_cycles(100)
        stats = rt.state().stats
        assert stats.cycles >= 100
        assert stats.rate == pytest.approx(RATE, rel=1e-6)
        assert stats.overruns == 0


hostile_value = st.one_of(
    st.floats(-1e9, 1e9),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, 3.2, -3.2]),
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.dictionaries(st.sampled_from(["joint1", "joint2", "joint3", "joint4"]), hostile_value),
        min_size=5,
        max_size=60,
    )
)
def test_property_full_loop_never_writes_an_unsafe_command(steps, joints_config):
    """Whatever joint targets arrive (NaN ones are refused at the API), every write is safe."""
    config = joints_config()

    async def scenario() -> list[np.ndarray]:
        clock = ManualClock(0.0)
        backend = SimBackend(config.servo_specs(), clock=clock, initial_positions=dict(config.home))
        seen: list[np.ndarray] = []
        async with Runtime(config, backend, clock=clock) as rt:
            rt.add_cycle_listener(lambda r: r.written and seen.append(r.command.copy()))
            await rt.command(Command.ENABLE)
            for targets in steps:
                with contextlib.suppress(InvalidTarget):
                    if targets:
                        rt.set_joint_targets(targets)
                await rt.wait_cycles(1)
            limits = (rt.limits.lower, rt.limits.upper, rt.safety.step_bound)
        seen.append(np.concatenate(limits))
        return seen

    *written, packed = asyncio.run(scenario())
    lower, upper, bound = np.split(packed, 3)
    for prev, cmd in itertools.pairwise(written):
        assert np.all(cmd >= lower) and np.all(cmd <= upper)
        assert np.all(np.abs(cmd - prev) <= bound + 1e-12)
