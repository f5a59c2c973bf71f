"""SimBackend: the Backend protocol in process, deterministic under a manual clock."""

import math

import numpy as np
import pytest

from hilbot.hal.backend import Backend, EffortUnit, HardwareErrorFlags
from hilbot.hal.errors import CommandError, CommTimeout, ConfigError, HalError
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.sim_backend import SimBackend

SERVOS = [
    ServoSpec(1, "XM430-W350", "waist"),
    ServoSpec(2, "XM430-W350", "shoulder", offset=0.1, direction=-1),
    ServoSpec(3, "XM430-W350", "shoulder", offset=0.1, direction=1, shadow_of=2),
    ServoSpec(4, "XL430-W250", "elbow", gear_ratio=2.0),
    ServoSpec(5, "AX-12A", "wrist"),
]


def make(clock, **options) -> SimBackend:
    return SimBackend(SERVOS, clock=clock, **options)


async def test_it_is_a_backend_and_reads_si_units(clock):
    async with make(clock, initial_positions={"waist": 0.3}) as sim:
        assert isinstance(sim, Backend)
        assert sim.joint_names == ("waist", "shoulder", "elbow", "wrist")  # shadow folded
        state = await sim.read()
        assert state.position[0] == pytest.approx(0.3, abs=sim.model.quantum[0])
        assert state.position[1] == pytest.approx(0.1)  # offset at the center tick
        assert state.effort_unit == (
            EffortUnit.AMPERE,
            EffortUnit.AMPERE,
            EffortUnit.PERCENT,  # XL430: register 126 is load
            EffortUnit.PERCENT,
        )
        assert state.temperature.tolist() == [25.0] * 4
        assert state.hardware_errors == (HardwareErrorFlags.NONE,) * 4
        assert state.timestamp == clock.now
        assert state.counters.transactions == 1


async def test_commanded_positions_are_reached_through_offset_direction_and_gearing(clock):
    async with make(clock) as sim:
        await sim.set_torque(True)
        target = {"waist": 0.5, "shoulder": -0.4, "elbow": 0.7, "wrist": -1.0}
        await sim.write(target)
        clock.advance(3.0)
        state = await sim.read()
        quantum = sim.model.quantum / sim._map.gear_ratio
        for joint, value in target.items():
            i = state.index(joint)
            assert state.position[i] == pytest.approx(value, abs=1.5 * quantum[i])
        assert np.all(state.velocity == 0.0)


async def test_the_same_clock_gives_the_same_states(clock):
    async def trajectory() -> list[np.ndarray]:
        clock.now = 100.0
        sim = make(clock, profile_velocity=1.0, profile_acceleration=4.0)
        out = []
        async with sim:
            await sim.set_torque(True)
            await sim.write({"waist": 1.0, "elbow": -0.5})
            for dt in (0.01, 0.2, 0.003, 0.5, 1.0):
                clock.advance(dt)
                out.append((await sim.read()).position)
        return out

    first, second = await trajectory(), await trajectory()
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not np.array_equal(first[0], first[-1])


async def test_profile_velocity_limits_joint_speed(clock):
    async with make(clock, profile_velocity=0.5) as sim:
        await sim.set_torque(True)
        await sim.write({"elbow": 1.0})
        clock.advance(1.0)
        state = await sim.read()
        assert state.position[state.index("elbow")] == pytest.approx(0.5, abs=0.05)
        assert state.velocity[state.index("elbow")] == pytest.approx(0.5, rel=0.05)


@pytest.mark.parametrize(
    ("command", "joint", "value"),
    [
        ({"waist": math.nan}, "waist", math.nan),
        ({"waist": 0.1, "elbow": math.inf}, "elbow", math.inf),
        ({"wrist": 3.0}, "wrist", 3.0),  # AX-12A covers ±150°
        ({"waist": 0.1, "hand": 0.0}, "hand", None),
    ],
    ids=["nan", "inf", "outside-servo-range", "unknown-joint"],
)
async def test_bad_commands_are_refused_and_move_nothing(clock, command, joint, value):
    async with make(clock) as sim:
        await sim.set_torque(True)
        goals = sim.model.goal.copy()
        with pytest.raises(CommandError) as info:
            await sim.write(command)
        assert info.value.joint == joint
        if value is not None:
            assert info.value.value == pytest.approx(value, nan_ok=True)
        assert np.array_equal(sim.model.goal, goals)


async def test_joint_limits_are_enforced(clock):
    async with make(clock, joint_limits={"waist": (-0.5, 0.5)}) as sim:
        await sim.write({"waist": 0.5})
        with pytest.raises(CommandError, match=r"outside \[-0.5, 0.5\]"):
            await sim.write({"waist": 0.51})
    with pytest.raises(ConfigError, match="unknown joint 'nope'"):
        make(clock, joint_limits={"nope": (0.0, 1.0)})


def test_bad_configs_are_refused(clock):
    with pytest.raises(ConfigError, match="XM999") as info:
        SimBackend([ServoSpec(1, "XM999", "a")], clock=clock)
    assert info.value.servo_id == 1
    with pytest.raises(ConfigError, match="not a primary"):
        SimBackend([ServoSpec(1, "XM430-W350", "a", shadow_of=7)], clock=clock)
    with pytest.raises(ConfigError, match="two primary"):
        SimBackend([ServoSpec(1, "XM430-W350", "a"), ServoSpec(2, "XM430-W350", "a")], clock=clock)


async def test_a_shadow_servo_adds_its_torque(clock):
    async with make(clock, load={"shoulder": 2.0, "waist": 2.0}) as sim:
        await sim.set_torque(True)
        clock.advance(1.0)
        state = await sim.read()
        sag = np.abs(state.position - np.array([0.0, 0.1, 0.0, 0.0]))
        assert sag[1] == pytest.approx(sag[0] / 2, rel=0.2)  # two servos: half the error


async def test_gravity_load_shows_as_sag_and_effort(clock):
    async with make(clock, load={"elbow": lambda q: -0.6 * math.cos(q)}) as sim:
        await sim.set_torque(True)
        clock.advance(1.0)
        state = await sim.read()
        i = state.index("elbow")
        assert state.position[i] < 0.0
        assert state.effort[i] > 5.0  # [%] the servo pushes back


async def test_torque_subset_and_reboot_clear_an_overload(clock):
    async with make(clock) as sim:
        await sim.set_torque(True, ["waist"])
        assert sim.model.torque_enabled.tolist() == [True, False, False, False]
        sim.fault("waist").hardware_error = HardwareErrorFlags.OVERLOAD
        state = await sim.read()
        assert state.faults == {"waist": HardwareErrorFlags.OVERLOAD}
        assert not sim.model.torque_enabled[0]  # the firmware's shutdown
        await sim.reboot(["waist"])
        state = await sim.read()
        assert state.faults == {}


async def test_a_lost_reply_is_retried_then_raised(clock):
    async with make(clock, retries=2) as sim:
        sim.fault("elbow").drop_rate = 1.0
        with pytest.raises(CommTimeout) as info:
            await sim.read()
        assert info.value.servo_id == 4
        assert sim.counters.timeouts == 3
        assert sim.counters.retries == 2
        sim.fault("elbow").drop_rate = 0.0
        await sim.read()


async def test_random_drops_are_seeded(clock):
    async def failures(seed: int) -> list[bool]:
        sim = make(clock, retries=0, seed=seed)
        sim.fault("waist").drop_rate = 0.5
        out = []
        async with sim:
            for _ in range(40):
                try:
                    await sim.read()
                    out.append(False)
                except CommTimeout:
                    out.append(True)
        return out

    assert await failures(1) == await failures(1)
    assert 5 < sum(await failures(1)) < 35


async def test_an_unplugged_servo_times_out_and_powers_up_with_torque_off(clock):
    async with make(clock) as sim:
        await sim.set_torque(True)
        sim.fault("wrist").unplug()
        with pytest.raises(CommTimeout):
            await sim.read()
        with pytest.raises(CommTimeout) as info:
            await sim.reboot(["wrist"])
        assert (info.value.servo_id, info.value.instruction) == (5, "REBOOT")
        sim.fault("wrist").replug()
        await sim.read()
        assert sim.model.torque_enabled.tolist() == [True, True, True, False]


async def test_a_browned_out_servo_answers_again_after_a_reboot(clock):
    async with make(clock) as sim:
        sim.fault("elbow").brown_out()
        with pytest.raises(CommTimeout):
            await sim.read()
        await sim.reboot(["elbow"])
        await sim.read()


async def test_close_turns_torque_off_and_refuses_use(clock):
    sim = make(clock)
    async with sim:
        await sim.set_torque(True)
    assert not sim.model.torque_enabled.any()
    await sim.close()  # twice is fine
    with pytest.raises(HalError, match="closed"):
        await sim.read()
    with pytest.raises(HalError):
        await sim.__aenter__()
