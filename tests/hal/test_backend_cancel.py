"""A caller cancelled while ``write`` waits on the previous goal leaves the bus thread working.

``write`` waits for the previous goal packet to go out (back-pressure). Cancelling that
wait (the control loop stopping) cancelled the queued goal's future; the bus thread then
crashed on ``set_result`` once it sent the packet, and every later call (the shutdown's
torque off) timed out.
"""

import asyncio
import threading

from hilbot.hal.dynamixel.tables import RegisterName

GOAL = {"j1": 0.1, "j2": -0.1, "j3": 0.05}


async def eventually(predicate, what: str, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"{what} not reached within {timeout} s"
        await asyncio.sleep(0.005)


async def test_cancelling_a_write_waiting_on_the_previous_goal_keeps_the_bus_thread(
    open_bus, backend_for, chain
):
    servos = chain("XM430-W350", 3)
    vbus = open_bus(servos)
    crashes: list[threading.ExceptHookArgs] = []
    hook, threading.excepthook = threading.excepthook, crashes.append
    try:
        async with backend_for(vbus, servos, pipeline=False, io_timeout=2.0) as arm:
            await arm.set_torque(True)
            for servo in servos:  # no replies: the next call holds the bus for a while
                vbus.faults(servo.id).unplug()
            reading = asyncio.ensure_future(arm.set_torque(True))
            await asyncio.sleep(0)
            await arm.write(GOAL)  # queued behind it
            first = arm._pending
            waiting = asyncio.ensure_future(arm.write(GOAL))  # waits on the first goal
            await eventually(lambda: not waiting.done() and not first.done(), "a waiting write")
            await asyncio.sleep(0.05)
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await eventually(first.done, "the cancel reaching the first goal's future")
            assert first.cancelled()  # the case: a queued goal whose waiter was cancelled
            for servo in servos:
                vbus.faults(servo.id).replug()
            await asyncio.gather(reading, return_exceptions=True)
            await eventually(first.done, "the first goal sent")
            await arm.set_torque(False)  # the bus thread still runs jobs
            assert all(vbus.register(s.id, RegisterName.TORQUE_ENABLE) == 0 for s in servos)
    finally:
        threading.excepthook = hook
    assert not crashes, [f"{c.thread}: {c.exc_value!r}" for c in crashes]


async def test_the_feetech_backend_keeps_its_bus_thread_too():
    """The same case on a Feetech bus: one bus thread, one set of cancellation rules."""
    from hilbot.hal.feetech.backend import FeetechBackend
    from hilbot.hal.feetech.tables import FeetechRegister
    from hilbot.hal.mapping import BusSpec, ServoSpec
    from hilbot.sim.virtual_bus import FeetechVirtualBus

    servos = [ServoSpec(i, "STS3215", f"j{i}") for i in (1, 2, 3)]
    crashes: list[threading.ExceptHookArgs] = []
    hook, threading.excepthook = threading.excepthook, crashes.append
    try:
        with FeetechVirtualBus({s.id: s.model for s in servos}, 1_000_000) as vbus:
            spec = BusSpec(vbus.port, family="feetech")
            # a long reply slack: a read of an unplugged servo holds the bus for a while
            async with FeetechBackend(spec, servos, margin_ms=400.0, io_timeout=5.0) as arm:
                await arm.set_torque(True)
                for servo in servos:  # no replies: the next call holds the bus for a while
                    vbus.fault(servo.id).unplug()
                reading = asyncio.ensure_future(arm.set_torque(True))
                await asyncio.sleep(0)
                await arm.write(GOAL)  # queued behind it
                first = arm._pending
                waiting = asyncio.ensure_future(arm.write(GOAL))  # waits on the first goal
                await eventually(lambda: not waiting.done() and not first.done(), "a waiting write")
                await asyncio.sleep(0.05)  # the write is waiting on the first goal's future
                waiting.cancel()
                await asyncio.gather(waiting, return_exceptions=True)
                await eventually(first.done, "the cancel reaching the first goal's future")
                assert first.cancelled()
                for servo in servos:
                    vbus.fault(servo.id).replug()
                await asyncio.gather(reading, return_exceptions=True)
                await arm.set_torque(False)  # the bus thread still runs jobs
                torque = FeetechRegister.TORQUE_ENABLE
                assert all(vbus.register(s.id, torque) == 0 for s in servos)
    finally:
        threading.excepthook = hook
    assert not crashes, [f"{c.thread}: {c.exc_value!r}" for c in crashes]
