"""The cheap per-call path of ``Solver.solve``: cached options, the box, the seed fast path."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hilbot.kinematics.ik import DLSSolver
from hilbot.kinematics.ik.box import Box

TARGET = np.array([0.3, 0.1, 0.4])


def test_cached_options_still_reject_bad_values_after_good_ones(load):
    robot = load("ur5")
    solver = DLSSolver()
    q0 = np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])
    solver.solve(robot, q0, "base_link", "tool0", TARGET, max_iterations=20)
    # Equal to the cached key (20.0 == 20), but not an int: must still be rejected.
    with pytest.raises(ValueError, match="max_iterations"):
        solver.solve(robot, q0, "base_link", "tool0", TARGET, max_iterations=20.0)  # type: ignore[arg-type]
    # NaN never equals the cached key.
    solver.solve(robot, q0, "base_link", "tool0", TARGET, tolerance=1e-4)
    with pytest.raises(ValueError, match="tolerance"):
        solver.solve(robot, q0, "base_link", "tool0", TARGET, tolerance=math.nan)
    # Options change between calls take effect.
    one = solver.solve(robot, q0, "base_link", "tool0", TARGET, max_iterations=1)
    assert one.iterations == 1
    many = solver.solve(robot, q0, "base_link", "tool0", TARGET, max_iterations=50)
    assert many.iterations > 1


def test_box_contains_and_unpacks():
    box = Box(np.array([-1.0, -np.inf]), np.array([1.0, 2.0]))
    assert box.bounded
    assert box.contains(np.array([0.0, -1e9]))
    assert box.contains(np.array([1.0, 2.0]))
    assert not box.contains(np.array([1.0 + 1e-12, 0.0]))
    assert not box.contains(np.array([math.nan, 0.0]))
    lower, upper = box
    np.testing.assert_array_equal(lower, [-1.0, -np.inf])
    np.testing.assert_array_equal(upper, [1.0, 2.0])
    free = Box(np.full(2, -np.inf), np.full(2, np.inf))
    assert not free.bounded
    assert free.contains(np.array([1e300, -1e300]))
    assert "Box(lower=" in repr(box)


def test_seed_array_is_copied_not_aliased(load):
    robot = load("ur5")
    q0 = np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])
    before = q0.copy()
    sol = DLSSolver().solve(robot, q0, "base_link", "tool0", TARGET)
    np.testing.assert_array_equal(q0, before)
    assert sol.q is not q0
    assert sol.positions.keys() == {
        n for n, _ in robot.path_between("base_link", "tool0").jacobian_columns
    }


def test_seed_outside_the_limits_is_clipped_into_them(load):
    robot = load("panda")
    chain = robot.path_between("panda_link0", "panda_hand_tcp")
    q0 = np.clip(np.zeros(7), chain.lower, chain.upper)
    target = chain.fk(q0)[:3, 3]
    outside = q0.copy()
    outside[3] = chain.upper[3] + 0.5
    sol = DLSSolver().solve(robot, outside, "panda_link0", "panda_hand_tcp", target)
    assert np.all(sol.q >= chain.lower) and np.all(sol.q <= chain.upper)


def test_huge_finite_seed_is_not_called_infinite(load):
    robot = load("ur5")
    info = DLSSolver().info(robot.path_between("base_link", "tool0"))
    q, _ = info.read(np.array([1e308, 1e308, 0.0, 0.0, 0.0, 0.0]))
    assert np.isfinite(q).all()
    with pytest.raises(ValueError, match="shoulder_pan_joint"):
        info.read(np.array([math.inf, 0.0, 0.0, 0.0, 0.0, 0.0]))
