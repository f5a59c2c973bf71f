"""The safety layer: limits, whole-vector step scaling, NaN rejection, clamp reports, modes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hilbot.driver.runtime.errors import RuntimeStateError
from hilbot.driver.runtime.safety import (
    ClampKind,
    JointLimits,
    Mode,
    ModeMachine,
    SafetyLayer,
    effective_limits,
)

NAMES = ("a", "b", "c")
LOWER = np.array([-1.0, -0.5, 0.0])
UPPER = np.array([1.0, 0.5, 2.0])
VELOCITY = np.array([10.0, 10.0, 1.0])  # c: 1 rad/s -> 0.01 rad per 10 ms cycle
PERIOD = 0.01
MAX_DELTA = 0.05


def layer() -> SafetyLayer:
    return SafetyLayer(JointLimits(NAMES, LOWER, UPPER, VELOCITY), MAX_DELTA, PERIOD)


def test_small_step_inside_limits_passes_unchanged():
    safety = layer()
    last = np.array([0.0, 0.0, 1.0])
    desired = np.array([0.01, -0.02, 1.005])
    np.testing.assert_array_equal(safety.apply(desired, last), desired)
    assert safety.total_clamps == 0


def test_step_is_scaled_as_a_whole_keeping_its_direction():
    safety = layer()
    last = np.zeros(3) + np.array([0.0, 0.0, 1.0])
    desired = last + np.array([0.5, 0.25, 0.0])
    cmd = safety.apply(desired, last, cycle=7)
    step = cmd - last
    assert np.max(np.abs(step)) == pytest.approx(MAX_DELTA)
    assert step[0] / step[1] == pytest.approx(2.0)  # direction kept
    kinds = {e.kind for e in safety.events}
    assert kinds == {ClampKind.MAX_DELTA}
    event = next(e for e in safety.events if e.joint == "a")
    assert (event.cycle, event.before, event.after) == (7, 0.5, pytest.approx(0.05))


def test_velocity_limit_binds_when_tighter_than_max_delta():
    safety = layer()
    last = np.array([0.0, 0.0, 1.0])
    cmd = safety.apply(np.array([0.0, 0.0, 1.5]), last)
    assert cmd[2] == pytest.approx(1.0 + 1.0 * PERIOD)
    assert safety.counts[ClampKind.VELOCITY] == 1


def test_joint_limits_clip_and_are_reported():
    safety = layer()
    last = np.array([0.99, 0.0, 1.0])
    cmd = safety.apply(np.array([3.0, 0.0, 1.0]), last)
    assert cmd[0] == 1.0
    event = safety.events[0]
    assert (event.kind, event.joint, event.before, event.after) == (
        ClampKind.JOINT_LIMIT,
        "a",
        3.0,
        1.0,
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_joint_holds_its_last_command(bad):
    safety = layer()
    last = np.array([0.1, 0.2, 1.0])
    cmd = safety.apply(np.array([bad, 0.21, 1.0]), last)
    assert cmd[0] == 0.1 and cmd[1] == pytest.approx(0.21)
    assert safety.counts[ClampKind.NON_FINITE] == 1


def test_entry_command_clips_small_excursions_and_flags_large_ones():
    safety = layer()
    cmd, bad = safety.entry_command(np.array([1.005, 0.0, 1.0]))
    assert bad is None and cmd[0] == 1.0
    _, bad = safety.entry_command(np.array([1.5, 0.0, 1.0]))
    assert bad == 0


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.floats(-5, 5)


@settings(max_examples=120, deadline=None)
@given(
    start=arrays(np.float64, 3, elements=st.floats(0, 1)),
    targets=st.lists(arrays(np.float64, 3, elements=finite_or_not), min_size=1, max_size=40),
)
def test_property_commands_never_leave_limits_or_exceed_the_step(start, targets):
    safety = layer()
    last = LOWER + start * (UPPER - LOWER)
    bound = np.minimum(MAX_DELTA, VELOCITY * PERIOD)
    for i, desired in enumerate(targets):
        cmd = safety.apply(desired, last, cycle=i)
        assert np.all(np.isfinite(cmd))
        assert np.all(cmd >= LOWER) and np.all(cmd <= UPPER)
        assert np.all(np.abs(cmd - last) <= bound + 1e-12)
        last = cmd


def test_effective_limits_intersect_urdf_soft_and_margin():
    urdf = {"a": (-2.0, 2.0, 4.0), "b": (-1.0, 1.0, 2.0), "c": (-np.inf, np.inf, 0.0)}
    limits = effective_limits(
        ["a", "b", "c"],
        urdf,
        soft_limits={"a": (-3.0, 0.5), "c": (-1.0, 1.0)},
        margin=0.1,
        velocity=0.5,
    )
    np.testing.assert_allclose(limits.lower, [-1.9, -0.9, -1.0])
    np.testing.assert_allclose(limits.upper, [0.5, 0.9, 1.0])
    np.testing.assert_allclose(limits.velocity, [2.0, 1.0, np.inf])
    per_joint = effective_limits(["a"], urdf, soft_limits={}, margin=0.0, velocity={"a": 1.5})
    assert per_joint.velocity[0] == 1.5


def test_mode_machine_transitions():
    modes = ModeMachine()
    assert modes.mode is Mode.DISARMED
    modes.enable()
    assert modes.mode is Mode.ARMED
    modes.fault()
    assert modes.mode is Mode.FAULTED
    with pytest.raises(RuntimeStateError) as err:
        modes.enable()
    assert err.value.mode == "faulted" and "reset" in err.value.reason
    modes.reset()
    modes.enable()
    modes.estop()
    modes.disable()  # does not clear the latch
    modes.fault()  # neither does a fault
    assert modes.mode is Mode.ESTOPPED
    modes.reset()
    assert modes.mode is Mode.DISARMED


def test_possible_goals_keep_the_command_within_one_step_of_each():
    """After writes that raised, every goal that may be on the bus bounds the next step."""
    rng = np.random.default_rng(3)
    safety = layer()
    bound = safety.step_bound
    for _ in range(2000):
        last = rng.uniform(LOWER, UPPER)
        # Goals that may be on the bus: each within one step of the last and of each other.
        other = np.clip(last + rng.uniform(-1.0, 1.0, last.shape) * bound, LOWER, UPPER)
        possible = (np.minimum(last, other), np.maximum(last, other))
        desired = rng.normal(0.0, 10.0, last.shape)
        cmd = safety.apply(desired, last, possible=possible)
        for goal in (last, other):
            assert np.all(np.abs(cmd - goal) <= bound + 1e-12)
        assert np.all(cmd >= LOWER) and np.all(cmd <= UPPER)


def test_an_inconsistent_possible_box_still_cannot_break_the_step_from_last():
    safety = layer()
    last = (LOWER + UPPER) / 2
    far = (np.minimum(last + 10.0, UPPER), np.minimum(last + 10.0, UPPER))
    cmd = safety.apply(last + 5.0, last, possible=far)
    assert np.all(np.abs(cmd - last) <= safety.step_bound + 1e-12)
