"""An IK problem is reported once per kind, not once per target: no log flood, no fault-log churn.

The full loop on the simulated backend: a stream of unreachable targets, each a little
further off (so each error message differs in its numbers), as a teleop client sends.
"""

from __future__ import annotations

import logging
import re

import numpy as np

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command, FaultKind

TARGETS = 300  # unreachable targets, one per cycle


def ik_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("fault (ik)")]


async def test_a_stream_of_unreachable_targets_is_one_report_then_a_count(clock, caplog):
    caplog.set_level(logging.INFO, logger="hilbot.driver.runtime.loop")
    config = load_config("openmanipulator_x")
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        await rt.wait_cycles(2)
        start = rt.state().poses["arm"][:3, 3].copy()
        for i in range(TARGETS):
            rt.set_target("arm", (1.0 + 0.001 * i, 0.0, 0.1))  # ~1 m: out of reach
            await rt.wait_cycles(1)
        state = rt.state()
        assert state.stats.ik_failures >= TARGETS
        ik = [f for f in state.fault_log if f.kind is FaultKind.IK]
        assert len(ik) == 1 and "target is" in ik[0].detail, ik
        assert len(ik_lines(caplog)) == 1, ik_lines(caplog)
        # A reachable target ends the problem: one line says how often it recurred.
        for _ in range(20):
            rt.set_target("arm", start + np.array([0.0, 0.01, 0.0]))
            await rt.wait_cycles(1)
        lines = ik_lines(caplog)
        assert len(lines) == 2, lines
        count = re.search(
            r"the same problem \(Unreachable\) (\d+) more times; the last: ", lines[1]
        )
        assert count is not None and int(count.group(1)) >= TARGETS - 1, lines[1]
        assert len([f for f in rt.state().fault_log if f.kind is FaultKind.IK]) == 1
        # The next unreachable target is a new problem again: reported, once.
        for i in range(10):
            rt.set_target("arm", (1.0 + 0.001 * i, 0.0, 0.1))
            await rt.wait_cycles(1)
        assert len(ik_lines(caplog)) == 3
