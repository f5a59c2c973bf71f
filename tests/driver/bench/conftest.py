"""A synthetic recording with known errors, for tests that need no runtime."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hilbot.driver.bench.buffer import CycleBuffer
from hilbot.driver.bench.recording import ClampKind, Recording, RecordingHeader
from hilbot.hal.backend import HardwareErrorFlags

RATE = 100.0
JOINTS = ("joint1", "joint2")
CHAINS = ("arm",)


def make_recording(
    n: int = 200,
    *,
    joint_offset: float = 0.01,
    ee_offset: float = 0.002,
    lateness: float = 50e-6,
    clamps: int = 0,
    fault_at: int | None = None,
) -> Recording:
    """Joints trail the command by ``joint_offset`` [rad]; the EE misses by ``ee_offset`` [m]."""
    rng = np.random.default_rng(7)
    buf = CycleBuffer(JOINTS, CHAINS, capacity=16)  # small on purpose: exercises growth
    for k in range(n):
        row = buf.next_row()
        a = buf.arrays
        t = k / RATE
        a["cycle"][row] = k + 1
        a["t"][row] = t
        a["lateness"][row] = lateness * (1.0 + 0.1 * rng.standard_normal())
        a["cycle_time"][row] = 0.2 / RATE
        a["ik_time"][row] = 0.05 / RATE
        a["mode"][row] = 1
        command = np.array([np.sin(t), np.cos(t)])
        a["q_command"][row] = command
        a["q_target"][row] = command
        a["q_measured"][row] = command if k == 0 else a["q_command"][row - 1] + joint_offset
        a["ee_target"][row, 0] = [0.2, 0.0, 0.1]
        a["ee_measured"][row, 0] = [0.2 + ee_offset, 0.0, 0.1]
        if fault_at is not None and k >= fault_at:
            a["hw_errors"][row, 1] = HardwareErrorFlags.OVERLOAD
            a["mode"][row] = 3
    for i in range(clamps):
        buf.clamp_events.append((i + 1, 0, int(ClampKind.DELTA), 0.5, 0.1))
    header = RecordingHeader(
        joint_names=JOINTS,
        chain_names=CHAINS,
        rate_hz=RATE,
        scenario={"name": "synthetic"},
    )
    return buf.finish(header)


@pytest.fixture
def synthetic() -> Callable[..., Recording]:
    """The ``make_recording`` factory."""
    return make_recording
