"""Every injected fault surfaces as its typed error, is counted, and is recovered from."""

import asyncio

import pytest

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.tables import RegisterName as N
from hilbot.hal.errors import CommandError, CommTimeout, CrcError, HardwareFault


@pytest.fixture
async def six(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 6)
    vbus = open_bus(servos, seed=7)
    async with backend_for(vbus, servos, retries=1) as arm:
        yield vbus, arm


async def test_a_servo_that_never_answers(six):
    vbus, arm = six
    before = arm.counters
    vbus.faults(3).drop_rate = 1.0
    with pytest.raises(CommTimeout) as err:
        await arm.read()
    assert err.value.servo_id == 3
    after = arm.counters
    assert after.timeouts - before.timeouts >= 2  # the first try and the one retry
    assert after.retries - before.retries == 1
    vbus.faults(3).clear()
    state = await arm.read()  # recovers by itself once the servo answers again
    assert state.counters.timeouts == after.timeouts


async def test_occasional_drops_are_retried(six):
    vbus, arm = six
    vbus.faults(2).drop_rate = 0.3
    for _ in range(30):
        try:
            await arm.read()
        except CommTimeout as exc:  # 0.3 x 0.3: a drop on the retry too is still possible
            assert exc.servo_id in range(1, 7)
    counters = arm.counters
    assert counters.retries > 0
    assert counters.timeouts >= counters.retries


async def test_corrupt_replies_are_crc_errors(six):
    vbus, arm = six
    before = arm.counters
    vbus.faults(5).corrupt_rate = 1.0
    with pytest.raises(CrcError) as err:
        await arm.read()
    assert err.value.servo_id == 5
    after = arm.counters
    # the fast read's one packet fails its CRC; the retry, a plain sync read, finds servo 5's
    assert after.crc_errors - before.crc_errors == 2
    assert after.retries - before.retries == 1
    vbus.faults(5).clear()
    state = await arm.read()
    assert state.counters.crc_errors == after.crc_errors


async def test_corrupt_reply_on_a_plain_sync_read(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 3)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, fast_read=False, retries=2) as arm:
        vbus.faults(2).corrupt_rate = 1.0
        with pytest.raises(CrcError) as err:
            await arm.read()
        assert err.value.servo_id == 2
        assert arm.counters.crc_errors == 3
        assert arm.counters.retries == 2


async def test_a_late_reply_is_a_timeout_then_recovers(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, retries=0) as arm:
        vbus.faults(1).delay = 0.2  # far beyond the reply deadline
        with pytest.raises(CommTimeout) as err:
            await arm.read()
        assert err.value.servo_id == 1
        vbus.faults(1).delay = 0.0
        await asyncio.sleep(0.25)  # let the late reply drain
        state = await arm.read()
        assert state.counters.timeouts >= 1


async def test_brown_out_then_reboot(six):
    vbus, arm = six
    vbus.faults(4).brown_out()
    with pytest.raises(CommTimeout) as err:
        await arm.read()
    assert err.value.servo_id == 4
    await arm.reboot(["j4"])
    state = await arm.read()
    assert state.position[3] == pytest.approx(0.0, abs=0.01)
    assert vbus.register(4, N.TORQUE_ENABLE) == 0  # a rebooted servo comes back limp


@pytest.mark.parametrize("flag", [f for f in HardwareErrorFlags if f], ids=lambda f: f.name)
async def test_hardware_error_is_reported_blocks_torque_and_clears_on_reboot(six, flag):
    vbus, arm = six
    vbus.raise_hardware_error(2, flag)
    state = await arm.read()
    assert state.hardware_errors[1] == flag
    assert state.faults == {"j2": flag}
    with pytest.raises(HardwareFault) as err:
        await arm.set_torque(True)
    assert err.value.servo_id == 2
    assert err.value.flags == flag
    await arm.reboot(["j2"])
    state = await arm.read()
    assert state.faults == {}
    await arm.set_torque(True)


async def test_hardware_error_on_protocol1(open_bus, backend_for, chain):
    servos = chain("MX-28", 2)
    vbus = open_bus(servos, protocol=1)
    async with backend_for(vbus, servos, protocol=1) as arm:
        vbus.raise_hardware_error(1, HardwareErrorFlags.OVERHEATING | HardwareErrorFlags.OVERLOAD)
        state = await arm.read()
        assert (
            state.hardware_errors[0] == HardwareErrorFlags.OVERHEATING | HardwareErrorFlags.OVERLOAD
        )
        vbus.raise_hardware_error(2, HardwareErrorFlags.INPUT_VOLTAGE)  # 1.0's third bit
        state = await arm.read()
        assert state.hardware_errors[1] == HardwareErrorFlags.INPUT_VOLTAGE
        # Protocol 1.0 has no REBOOT: refused before anything is sent, in plain words
        with pytest.raises(CommandError, match=r"Protocol 1\.0 has no reboot instruction"):
            await arm.reboot(["j1"])


async def test_fast_read_with_a_missing_servo_names_it(six):
    vbus, arm = six
    vbus.faults(4).unplug()
    with pytest.raises(CommTimeout) as err:
        await arm.read()
    assert err.value.servo_id == 4
    assert arm.counters.retries == 1
    # servos 1-3 answered before the gap: their slices carry valid running CRCs
    assert arm.counters.crc_errors == 0
    vbus.faults(4).replug()
    await arm.read()


async def test_a_vanished_port_is_a_port_error(open_bus, backend_for, chain):
    from hilbot.hal.errors import PortError

    servos = chain("XM430-W350", 2)
    vbus = open_bus(servos)
    arm = backend_for(vbus, servos)
    async with arm:
        await arm.read()
        vbus.stop()  # the adapter is unplugged: the pty's other end goes away
        with pytest.raises(PortError):
            await arm.write({"j1": 0.1})  # queued; its failure surfaces on the next call
            await arm.read()


async def test_a_tripped_bus_watchdog_is_reported_counted_and_cleared(open_bus, backend_for):
    """Silence longer than the armed Bus Watchdog: each servo stops and ignores goals."""
    from hilbot.hal.mapping import ServoSpec

    servos = [
        ServoSpec(1, "XM430-W350", "base"),
        ServoSpec(2, "XM430-W350", "shoulder"),
        ServoSpec(3, "XM430-W350", "shoulder", direction=-1, shadow_of=2),
    ]
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, temperature_every=1) as arm:
        assert (await arm.read()).bus_watchdog_tripped == ()
        await arm.set_torque(True)
        await arm.arm_watchdog(0.3)  # headroom over this busy machine's stalls
        assert vbus.register(3, N.BUS_WATCHDOG) == 15
        # only the shadow's watchdog expires here; its joint counts as tripped
        with vbus.lock:
            vbus.servo(3).trip_watchdog()
        state = await arm.read()
        assert state.bus_watchdog_tripped == ("shoulder",)
        assert state.counters.watchdog_trips == 1
        await asyncio.sleep(0.45)  # silence: the others trip too
        state = await arm.read()
        assert state.bus_watchdog_tripped == ("base", "shoulder")
        assert state.counters.watchdog_trips == 3  # each servo's trip once
        held = vbus.register(1, N.GOAL_POSITION)
        await arm.write({"base": 0.5})
        await arm.read()
        assert vbus.register(1, N.GOAL_POSITION) == held  # the goal was refused
        await arm.disarm_watchdog()
        assert (await arm.read()).bus_watchdog_tripped == ()
        assert vbus.register(1, N.BUS_WATCHDOG) == 0
        await arm.write({"base": 0.5})
        await arm.read()
        assert vbus.register(1, N.GOAL_POSITION) != held
