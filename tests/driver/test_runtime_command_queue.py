"""Commands between cycles: a flood never starves the loop, and never delays an e-stop.

The full loop on the simulated backend, on a manual clock; ``FaultyBackend`` (no faults
planned) only counts what reaches the backend.
"""

from __future__ import annotations

import asyncio

from hilbot.driver.runtime.loop import COMMANDS_PER_CYCLE, Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command

FLOOD = 400


class Counting:
    """Counts the torque calls that reach ``inner`` (the real simulated backend)."""

    def __init__(self, inner):
        self.inner = inner
        self.torque_calls = 0

    async def set_torque(self, enabled, joints=None):
        self.torque_calls += 1
        await self.inner.set_torque(enabled, joints)

    def __getattr__(self, name):
        return getattr(self.inner, name)


async def test_a_command_flood_runs_a_few_per_cycle_and_an_estop_jumps_no_cycle(
    make_config, sim_factory, clock
):
    config = make_config("openmanipulator_x")
    async with Runtime(config, sim_factory(config), clock=clock) as rt:
        await rt.wait_cycles(1)
        start = rt.stats.cycles
        resets = [asyncio.ensure_future(rt.command(Command.RESET)) for _ in range(FLOOD)]
        await asyncio.sleep(0)
        await rt.wait_cycles(2)
        done = sum(f.done() for f in resets)
        assert done <= COMMANDS_PER_CYCLE * (rt.stats.cycles - start), done
        # An e-stop behind the rest of the flood takes effect before the next cycle.
        estop = asyncio.ensure_future(rt.command(Command.ESTOP))
        await asyncio.sleep(0)  # queued; the cycle under way may end, the next sees it
        await rt.wait_cycles(2)
        assert estop.done() and rt.mode is Mode.ESTOPPED
        assert all(f.done() for f in resets)  # the commands queued before it ran first
        await asyncio.gather(*resets, estop)


async def test_estops_in_effect_cost_no_bus_traffic(make_config, sim_factory, clock):
    config = make_config("openmanipulator_x", safety={"estop_action": "torque_off"})
    backend = Counting(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.command(Command.ESTOP)
        assert rt.mode is Mode.ESTOPPED
        calls = backend.torque_calls
        estops = [asyncio.ensure_future(rt.command(Command.ESTOP)) for _ in range(FLOOD)]
        await asyncio.sleep(0)
        await rt.wait_cycles(2)
        assert all(f.done() for f in estops)  # one e-stop for all of them, at once
        await asyncio.gather(*estops)
        for _ in range(10):
            await rt.command(Command.ESTOP)
        assert backend.torque_calls == calls and rt.mode is Mode.ESTOPPED
        await rt.command(Command.RESET)
        assert rt.mode is Mode.DISARMED
