"""The backend honours each servo's own limit registers, on the virtual bus, end to end.

Start-up reads Min/Max Position Limit (CW/CCW Angle Limit on 1.0), PWM Limit and
Current Limit, and refuses joint limits the servo would not accept, naming the fix; a
goal outside them at run time is a counted DataLimitError, never clamped.
"""

import pytest

from hilbot.driver.cli import main as hilbot
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.tables import RegisterName as N
from hilbot.hal.dynamixel.tables import model
from hilbot.hal.errors import DataLimitError, ServoLimitError, StartupProblem
from hilbot.hal.mapping import ServoSpec

XM = model("XM430-W350")
AX = model("AX-12A")


def tick_of(spec: ServoSpec, joint: float) -> int:
    """The Goal Position tick of a joint position, by the mapping's formula."""
    m = model(spec.model)
    scale = spec.direction * m.radians_per_tick / spec.gear_ratio
    return round(m.center_tick + (joint - spec.offset) / scale)


OPTIONS = {
    "--min-position-limit": (N.MIN_POSITION_LIMIT, N.CW_ANGLE_LIMIT),
    "--max-position-limit": (N.MAX_POSITION_LIMIT, N.CCW_ANGLE_LIMIT),
    "--pwm-limit": (N.PWM_LIMIT, None),
}


def set_limits(vbus, servo_id: int, *pairs: str, protocol: int = 2) -> None:
    """Set limit registers with WRITE packets on the virtual bus, as ``hilbot servo`` would.

    The set-up of a test about the backend, not about the tool: the tool's own round trip
    (10 ms margin, no retry) times out now and then on a busy host sharing the GIL with
    the in-process bus; the tests of the tool use ``servo_cli``.
    """
    for option, value in zip(pairs[::2], pairs[1::2], strict=True):
        name = OPTIONS[option][0 if protocol == 2 else 1]
        assert name is not None
        assert vbus.write_register(servo_id, name, int(value)) == 0


def servo_cli(vbus, *args: str, protocol: int = 2) -> None:
    argv = ["servo", "--port", vbus.port, "--protocol", str(protocol), *args]
    assert hilbot(argv) == 0


async def test_startup_refuses_joint_limits_past_max_position_limit_and_names_the_fix(
    open_bus, backend_for, capsys
):
    servos = [ServoSpec(1, "XM430-W350", "j1"), ServoSpec(2, "XM430-W350", "j2")]
    vbus = open_bus(servos)
    set_limits(vbus, 2, "--max-position-limit", "3000")
    limits = {"j1": (-1.0, 1.0), "j2": (-1.0, 1.6)}
    needed = tick_of(servos[1], 1.6)
    with pytest.raises(ServoLimitError) as info:
        async with backend_for(vbus, servos, joint_limits=limits):
            pytest.fail("the backend started")
    err = info.value
    assert (err.servo_id, err.register, err.address) == (2, "Max Position Limit", 48)
    assert (err.found, err.expected, err.problem) == (3000, needed, StartupProblem.LIMITS)
    assert err.command.endswith(f"--id 2 --max-position-limit {needed}")
    assert "3000" in str(err) and str(needed) in str(err) and "j2" in str(err)
    assert vbus.register(2, N.TORQUE_ENABLE) == 0
    # the command the error names makes the config acceptable
    servo_cli(vbus, *err.command.split(" --port ")[1].split()[1:])
    capsys.readouterr()
    async with backend_for(vbus, servos, joint_limits=limits) as arm:
        await arm.read()


@pytest.mark.parametrize(
    ("spec", "limits", "register", "option"),
    [
        # direction -1: the joint's upper limit is the servo's low tick (1396)
        (
            ServoSpec(1, "XM430-W350", "j1", offset=0.2, direction=-1),
            (-0.5, 1.2),
            "Min Position Limit",
            "--min-position-limit",
        ),
        # gear ratio 2: the joint's 0.6 rad are 1.2 rad of the servo (tick 2830)
        (
            ServoSpec(1, "XM430-W350", "j1", gear_ratio=2.0),
            (-0.2, 0.6),
            "Max Position Limit",
            "--max-position-limit",
        ),
    ],
    ids=["direction-offset", "gear-ratio"],
)
async def test_the_check_maps_joint_limits_through_offset_direction_and_gear(
    open_bus, backend_for, spec, limits, register, option
):
    vbus = open_bus([spec])
    set_limits(vbus, 1, "--min-position-limit", "1500", "--max-position-limit", "2600")
    with pytest.raises(ServoLimitError) as info:
        async with backend_for(vbus, [spec], joint_limits={"j1": limits}):
            pytest.fail("the backend started")
    ticks = sorted(tick_of(spec, v) for v in limits)
    expected = ticks[0] if register.startswith("Min") else ticks[1]
    assert (info.value.register, info.value.expected) == (register, expected)
    assert option in info.value.command
    assert f"upper limit {limits[1]:.4f}" in str(info.value)


async def test_limits_inside_the_registers_start_and_extended_mode_does_not_use_them(
    open_bus, backend_for
):
    spec = ServoSpec(1, "XM430-W350", "j1")
    vbus = open_bus([spec])
    set_limits(vbus, 1, "--max-position-limit", "2500")
    async with backend_for(vbus, [spec], joint_limits={"j1": (-0.5, 0.5)}) as arm:
        await arm.read()
    bus = DynamixelBus(vbus.port, 1_000_000, 2, margin_ms=100.0)
    bus.open()
    try:
        bus.write(1, 11, bytes([4]))  # Extended Position Control Mode (torque is off)
    finally:
        bus.close()
    async with backend_for(vbus, [spec], joint_limits={"j1": (-1.0, 1.0)}) as arm:
        await arm.write({"j1": 0.9})  # tick 2635 > 2500: the register is not used in mode 4
        assert arm.counters.data_limit_errors == 0


async def test_a_goal_past_the_limit_register_is_a_counted_data_limit_error_not_a_clamp(
    open_bus, backend_for
):
    servos = [ServoSpec(1, "XM430-W350", "j1"), ServoSpec(2, "XM430-W350", "j2")]
    vbus = open_bus(servos)
    set_limits(vbus, 2, "--max-position-limit", "3000")
    async with backend_for(vbus, servos) as arm:  # no joint limits given: the goal is checked
        before = vbus.register(2, N.GOAL_POSITION)
        goal = (3500 - 2048) * XM.radians_per_tick
        with pytest.raises(DataLimitError) as info:
            await arm.write({"j1": 0.1, "j2": goal})
        err = info.value
        assert (err.servo_id, err.joint, err.register, err.address) == (
            2,
            "j2",
            "Max Position Limit",
            48,
        )
        assert (err.value, err.limit) == (3500, 3000)
        assert "refused, not clamped" in str(err)
        assert arm.counters.data_limit_errors == 1
        await arm.read()  # the bus is in order; nothing was written, not even j1's goal
        assert vbus.register(2, N.GOAL_POSITION) == before
        assert vbus.register(1, N.GOAL_POSITION) == 2048
        state = await arm.read()
        assert state.counters.data_limit_errors == 1
        await arm.write({"j2": (2999 - 2048) * XM.radians_per_tick})  # inside: written
        await arm.read()
        assert vbus.register(2, N.GOAL_POSITION) == 2999


async def test_a_pwm_limit_of_zero_is_refused_at_start_up(open_bus, backend_for):
    spec = ServoSpec(1, "XM430-W350", "j1")
    vbus = open_bus([spec])
    set_limits(vbus, 1, "--pwm-limit", "0")
    with pytest.raises(ServoLimitError) as info:
        async with backend_for(vbus, [spec]):
            pytest.fail("the backend started")
    assert (info.value.register, info.value.found) == ("PWM Limit", 0)
    assert info.value.problem is StartupProblem.NO_TORQUE
    assert "--pwm-limit 885" in info.value.command


async def test_protocol1_angle_limits_are_honoured(open_bus, backend_for):
    spec = ServoSpec(1, "AX-12A", "j1")
    vbus = open_bus([spec], protocol=1)
    set_limits(vbus, 1, "--max-position-limit", "800", protocol=1)
    high = (900 - 512) * AX.radians_per_tick
    with pytest.raises(ServoLimitError) as info:
        async with backend_for(vbus, [spec], protocol=1, joint_limits={"j1": (-0.5, high)}):
            pytest.fail("the backend started")
    assert (info.value.register, info.value.address) == ("CCW Angle Limit", 8)
    assert (info.value.found, info.value.expected) == (800, 900)
    assert "--protocol 1" in info.value.command
    async with backend_for(vbus, [spec], protocol=1) as arm:
        with pytest.raises(DataLimitError, match="CCW Angle Limit"):
            await arm.write({"j1": high})
        assert arm.counters.data_limit_errors == 1


@pytest.mark.parametrize(
    ("protocol", "name", "limit", "beyond"),
    [(1, "AX-12A", 800, 900), (2, "XM430-W350", 3000, 3500)],
    ids=["1.0-angle-limit-error", "2.0-data-limit-error"],
)
def test_a_write_answered_with_a_limit_error_is_a_data_limit_error(
    open_bus, protocol, name, limit, beyond
):
    vbus = open_bus([ServoSpec(1, name, "j1")], protocol=protocol)
    set_limits(vbus, 1, "--max-position-limit", str(limit), protocol=protocol)
    bus = DynamixelBus(vbus.port, 1_000_000, protocol, margin_ms=100.0)
    bus.open()
    try:
        goal = model(name).register(N.GOAL_POSITION)
        with pytest.raises(DataLimitError) as info:
            bus.write(1, goal.address, goal.encode(beyond))
        assert (info.value.servo_id, info.value.address) == (1, goal.address)
        assert bus.counters.data_limit_errors == 1
        assert bus.counters.servo_errors == 1
    finally:
        bus.close()


@pytest.mark.parametrize(
    ("protocol", "name", "args", "message"),
    [
        (1, "AX-12A", ["--pwm-limit", "500"], "servo 1 (AX-12A) has no pwm limit register"),
        (2, "XM430-W350", ["--max-position-limit", "5000"], "must be in 0..4095, got 5000"),
    ],
    ids=["no-such-register", "out-of-range"],
)
def test_hilbot_servo_refuses_a_limit_the_servo_cannot_take_in_one_line(
    open_bus, capsys, protocol, name, args, message
):
    vbus = open_bus([ServoSpec(1, name, "j1")], protocol=protocol)
    argv = ["servo", "--port", vbus.port, "--protocol", str(protocol), "--id", "1", *args]
    assert hilbot(argv) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


async def test_torque_is_refused_on_a_servo_standing_outside_its_own_limits(
    open_bus, backend_for, caplog
):
    # moved there by hand with torque off: goal := present would be refused unseen and
    # the servo would jump to its old goal when torque came on
    spec = ServoSpec(1, "XM430-W350", "j1")
    vbus = open_bus([spec], initial_positions={1: 3500})
    set_limits(vbus, 1, "--max-position-limit", "3000")
    async with backend_for(vbus, [spec]) as arm:
        assert "stands outside its own limits" in caplog.text
        with pytest.raises(DataLimitError) as info:
            await arm.set_torque(True)
        assert (info.value.servo_id, info.value.register, info.value.value) == (
            1,
            "Max Position Limit",
            3500,
        )
        assert "move it inside by hand" in str(info.value)
        assert vbus.register(1, N.TORQUE_ENABLE) == 0
        assert arm.counters.data_limit_errors == 1
