"""Garbage collection paced by the control loop (hilbot.driver.runtime.ticker)."""

from __future__ import annotations

import gc

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command
from hilbot.driver.runtime.ticker import GcPacer


def _garbage(n: int) -> None:
    for _ in range(n):
        a: list[object] = []
        a.append(a)  # a cycle: only the collector frees it


def test_pacer_freezes_disables_and_restores() -> None:
    assert gc.isenabled()
    pacer, other = GcPacer(), GcPacer()
    pacer.start()
    other.start()
    try:
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
        pacer.stop()
        assert not gc.isenabled()  # the other user still runs
    finally:
        other.stop()
        pacer.stop()  # twice is harmless
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_pacer_collects_in_idle_time_and_when_garbage_piles_up() -> None:
    pacer = GcPacer()
    pacer.start()
    try:
        threshold = gc.get_threshold()[0]
        gc.collect(0)
        _garbage(threshold + 10)
        assert pacer.idle(0.0) == -1  # due, but no idle time: wait
        assert pacer.idle(1.0) >= 0  # idle time: collect now
        assert gc.get_count()[0] < threshold
        _garbage(9 * threshold)
        assert pacer.idle(0.0) >= 0  # piled up: collect even without idle time
        assert sum(pacer.collections) == 2
    finally:
        pacer.stop()


async def test_runtime_on_real_time_paces_gc_and_restores_it(make_config) -> None:
    config = make_config("openmanipulator_x", chains=[], rate_hz=500.0)
    runtime = Runtime(config, sim_backend(config))
    async with runtime:
        assert not gc.isenabled()
        await runtime.command(Command.ENABLE)
        present = runtime.state().command
        for _ in range(20):
            _garbage(gc.get_threshold()[0] // 10)
            runtime.set_joint_targets(present)
            await runtime.wait_cycles(2)
        assert runtime.stats.cycles >= 40
        assert runtime.state().joints is not None
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
