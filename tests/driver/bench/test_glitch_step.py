"""The bench's ``glitch`` fault step: readings of one servo moved, every packet valid."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.driver.bench.backends import BackendKind, ClockKind
from hilbot.driver.bench.errors import ScenarioError
from hilbot.driver.bench.runner import RunOptions, apply_fault, run_bench
from hilbot.driver.bench.scenario import FaultAction, parse_scenario
from hilbot.driver.runtime.config import load_config
from hilbot.sim.faults import ServoFaults

OFFSET = 0.3  # [rad]


def test_a_glitch_is_set_and_cleared_on_the_servo_record():
    record = ServoFaults(12)
    apply_fault(record, FaultAction.GLITCH, 0.5, clear=False, offset=OFFSET)
    assert record.glitching
    assert (record.glitch_offset, record.glitch_unit, record.glitch_rate) == (OFFSET, "rad", 0.5)
    assert record.glitch_replies is None
    apply_fault(record, FaultAction.GLITCH, 0.5, clear=True)
    assert not record.glitching


def test_a_glitch_step_needs_an_offset():
    with pytest.raises(ScenarioError, match="non-zero offset"):
        parse_scenario(
            {"name": "g", "steps": [{"kind": "fault", "action": "glitch", "joint": "joint2"}]}
        )


async def test_a_glitch_step_moves_the_readings_the_runtime_gets():
    config = load_config("openmanipulator_x")
    scenario = parse_scenario(
        {
            "name": "glitch",
            "steps": [
                {"kind": "hold", "duration": 0.2},
                {
                    "kind": "fault",
                    "action": "glitch",
                    "joint": "joint2",
                    "offset": OFFSET,
                    "rate": 0.5,
                    "duration": 0.3,
                },
                {"kind": "hold", "duration": 0.2},
            ],
        }
    )
    recording = await run_bench(
        config, scenario, BackendKind.SIM, ClockKind.FAKE, RunOptions(clock="fake")
    )
    j = recording.header.joint_names.index("joint2")
    off = recording["q_measured"][:, j] - config.home["joint2"]
    glitched = np.abs(off - OFFSET) < 0.01
    assert 0.2 * 0.3 * config.rate_hz < glitched.sum() < 0.8 * 0.3 * config.rate_hz
    assert np.all(glitched | (np.abs(off) < 0.01))  # every other reading is true
    assert not glitched[-10:].any()  # cleared after the step
    notes = [f for f in recording.header.faults if f["action"] == "glitch"]
    assert notes[0]["offset"] == OFFSET and notes[0]["rate"] == 0.5
    assert notes[1]["clear"] is True
