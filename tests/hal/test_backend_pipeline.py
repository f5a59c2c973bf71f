"""DynamixelBackend(pipeline=True): reads queued ahead while goals stream, fresh otherwise."""

import asyncio

import pytest

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.errors import CommTimeout


@pytest.fixture
async def piped(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 4)
    vbus = open_bus(servos, seed=3)
    async with backend_for(vbus, servos, pipeline=True, temperature_every=10_000) as arm:
        yield vbus, arm


async def idle(arm, timeout=20.0) -> None:
    """Wait until the read queued ahead and the last goal write are done.

    A fixed pause was not always enough: a busy host may run the bus thread late.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (arm._ahead is not None and not arm._ahead.done()) or (
        arm._pending is not None and not arm._pending.done()
    ):
        assert loop.time() < deadline, f"the queued bus jobs were not done within {timeout} s"
        await asyncio.sleep(0.005)


async def quiet_transactions(arm) -> int:
    """The bus's transaction count once nothing queued is left to run."""
    await idle(arm)
    await asyncio.sleep(0.1)  # and nothing else runs after them
    return arm.counters.transactions


async def test_without_writes_each_read_reads_now_and_queues_nothing(piped):
    _, arm = piped
    for _ in range(3):
        state = await arm.read()
        # nothing ran after the read the state came from
        assert await quiet_transactions(arm) == state.counters.transactions


async def test_while_streaming_the_next_read_is_queued_before_the_write(piped):
    _, arm = piped
    await arm.set_torque(True)
    goal = {"j1": 0.3, "j2": -0.2, "j3": 0.1, "j4": 0.0}
    states = []
    for k in range(12):
        state = await arm.read()
        states.append(state)
        if k == 1:
            # let the read queued above finish first, so that every write below is queued
            # after the read it follows is done (a write queued while that read is still
            # on the wire goes out before its reply is decoded: the next test)
            await quiet_transactions(arm)
        if k >= 2:
            # the state was read before the previous cycle's write, which ran after it,
            # and so did the read this call queued for the next cycle
            assert await quiet_transactions(arm) == state.counters.transactions + 2
        await arm.write(goal)
    # every state is a new read, in order
    stamps = [s.timestamp for s in states]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    # streaming still tracks the goals
    for _ in range(100):
        state = await arm.read()
        await arm.write(goal)
        await asyncio.sleep(0.005)
    assert state.positions() == pytest.approx(goal, abs=0.01)
    # once writes stop, the queued read is returned and the next read is fresh again
    await arm.read()
    state = await arm.read()
    assert await quiet_transactions(arm) == state.counters.transactions


async def test_a_write_queued_while_a_read_is_on_the_wire_goes_out_when_its_reply_is_in(piped):
    vbus, arm = piped
    await arm.set_torque(True)
    goal = {"j1": 0.2, "j2": -0.1, "j3": 0.1, "j4": 0.0}
    await arm.read()
    vbus.faults(4).delay = 0.04  # every reply takes 40 ms: each write is queued meanwhile
    before = arm.counters.transactions
    reads = writes = 0
    for _ in range(4):
        await arm.read()
        await arm.write(goal)
        reads, writes = reads + 1, writes + 1
    state = await arm.read()
    reads += 1
    # the state was handed over only once the read queued for the next cycle was out
    assert arm.counters.transactions == state.counters.transactions + 1
    # the write queued behind the read this state came from went out as soon as that
    # read's reply was in, before the state was decoded (its counters include it); only
    # the read queued for the next cycle ran after it
    assert await quiet_transactions(arm) == state.counters.transactions + 1
    # every write went out once: one transaction per read and write, one queued read more
    assert arm.counters.transactions - before == reads + writes + 1
    vbus.faults(4).clear()
    for _ in range(100):
        state = await arm.read()
        await arm.write(goal)
        await asyncio.sleep(0.005)
    assert state.positions() == pytest.approx(goal, abs=0.01)


async def test_a_state_read_before_a_reboot_is_never_returned_after_it(piped):
    vbus, arm = piped
    await arm.set_torque(True)
    goal = {"j1": 0.0, "j2": 0.0, "j3": 0.0, "j4": 0.0}
    for _ in range(3):
        await arm.read()
        await arm.write(goal)
    vbus.raise_hardware_error(2, HardwareErrorFlags.OVERLOAD)
    for _ in range(5):  # reported within a cycle or two, with a read queued behind it
        state = await arm.read()
        await arm.write(goal)
        if state.faults:
            break
    assert state.faults == {"j2": HardwareErrorFlags.OVERLOAD}
    await arm.reboot(["j2"])
    state = await arm.read()
    assert state.faults == {}


async def test_a_failed_queued_read_raises_and_the_stream_recovers(piped):
    vbus, arm = piped
    await arm.set_torque(True)
    goal = {"j1": 0.1, "j2": 0.1, "j3": 0.1, "j4": 0.1}
    for _ in range(3):
        await arm.read()
        await arm.write(goal)
    vbus.faults(3).drop_rate = 1.0
    with pytest.raises(CommTimeout) as err:
        for _ in range(3):
            await arm.read()
            await arm.write(goal)
    assert err.value.servo_id == 3
    vbus.faults(3).clear()
    for _ in range(3):
        state = await arm.read()
        await arm.write(goal)
    assert state.hardware_errors == (HardwareErrorFlags.NONE,) * 4


async def test_auto_pipelines_only_while_the_loop_outruns_the_bus(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 4)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, pipeline="auto", temperature_every=10_000) as arm:
        await arm.set_torque(True)
        goal = {"j1": 0.2, "j2": 0.0, "j3": 0.0, "j4": 0.0}
        for _ in range(5):  # a slow loop: the bus idles between cycles, every read is fresh
            state = await arm.read()
            assert await quiet_transactions(arm) == state.counters.transactions
            await arm.write(goal)
            await idle(arm)  # the write is out (a busy host may send it late)
            await asyncio.sleep(0.02)
        for _ in range(20):  # back to back: the write is still queued when the read comes
            state = await arm.read()
            await arm.write(goal)
        assert arm._ahead is not None  # a read is queued for the next cycle
        for _ in range(3):  # slow again: the queued read is done before it is asked for
            await idle(arm)
            await asyncio.sleep(0.02)
            state = await arm.read()
            await arm.write(goal)
        await idle(arm)
        await asyncio.sleep(0.02)
        state = await arm.read()
        assert await quiet_transactions(arm) == state.counters.transactions
