"""The cheap per-call path of ``Solver.solve``: cached options, the box, the seed fast path."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hilbot.kinematics import UnknownLink, load_urdf
from hilbot.kinematics.ik import DLSSolver, InvalidPositions, InvalidTarget, Unreachable
from hilbot.kinematics.ik.core.box import Box
from hilbot.kinematics.ik.core.solver import Solver

TARGET = np.array([0.3, 0.1, 0.4])
ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"


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
    # Its sum overflows, but it is too large, not infinite.
    with pytest.raises(InvalidPositions, match=r"within ±1e\+09") as caught:
        info.read(np.array([1e308, 1e308, 0.0, 0.0, 0.0, 0.0]))
    assert caught.value.joints == ["shoulder_pan_joint", "shoulder_lift_joint"]
    with pytest.raises(ValueError, match=r"finite; not so for joints \['shoulder_pan_joint'\]"):
        info.read(np.array([math.inf, 0.0, 0.0, 0.0, 0.0, 0.0]))
    q, _ = info.read(np.array([1e9, -1e9, 0.0, 0.0, 0.0, 0.0]))  # the bound itself is fine
    assert np.isfinite(q).all()


# --- the DLS fast path (a per-(robot, source, target) plan) against the general path ---

FAST_ARMS = [
    ("ur5", "base_link", "tool0"),
    ("panda", "panda_link0", "panda_hand_tcp"),
    ("widowx_250s", "base_link", "ee_gripper_link"),
]


def _tracking_cases(robot, source, tip, count=40, seed=3):
    chain = robot.path_between(source, tip)
    names = [n for n, _ in chain.jacobian_columns]
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(chain.lower, -2.5), np.minimum(chain.upper, 2.5)
    for _ in range(count):
        q = rng.uniform(lo, hi)
        seed_q = np.clip(q + rng.uniform(-0.05, 0.05, q.shape), chain.lower, chain.upper)
        yield names, seed_q, chain.fk(q)


class _State:
    """A joint state as the HAL reads one: names and positions in bus order."""

    def __init__(self, names, position):
        self.names = tuple(names)
        self.position = np.asarray(position, dtype=np.float64)


def _same(a, b):
    np.testing.assert_array_equal(a.q, b.q)
    assert (a.iterations, a.residual, a.orientation_residual, a.reached, a.status) == (
        b.iterations,
        b.residual,
        b.orientation_residual,
        b.reached,
        b.status,
    )
    assert a.positions == b.positions


@pytest.mark.parametrize(("name", "source", "tip"), FAST_ARMS)
def test_fast_path_gives_the_general_paths_floats(load, name, source, tip):
    robot = load(name)
    fast, general = DLSSolver(), DLSSolver()
    extra = {"some_other_joint": 0.25}
    for names, seed_q, pose in _tracking_cases(robot, source, tip):
        as_floats = dict(zip(names, seed_q.tolist(), strict=True))
        state = _State(["some_other_joint", *reversed(names)], [0.25, *seed_q[::-1]])
        seeds = [
            dict(as_floats, **extra),
            seed_q,
            dict(zip(names, seed_q, strict=True)),
            state,
        ]
        targets = [pose, (pose[:3, 3], pose[:3, :3]), pose[:3, 3]]
        for seed in seeds:
            for target in targets:
                a = fast.solve(robot, seed, source, tip, target, max_iterations=20)
                b = Solver.solve(general, robot, seed, source, tip, target, max_iterations=20)
                _same(a, b)
                if seed is seeds[0] or seed is state:  # joints outside the chain: unchanged
                    assert a.positions["some_other_joint"] == 0.25
    assert fast._plans, "the fast path was never planned"


def test_fast_path_keeps_every_validation(load):
    robot = load("ur5")
    chain = robot.path_between("base_link", "tool0")
    names = [n for n, _ in chain.jacobian_columns]
    q0 = np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])
    pose = chain.fk(q0 + 0.02)
    solver = DLSSolver()
    seed = dict(zip(names, q0.tolist(), strict=True))
    for _ in range(2):  # the second call runs on the plan
        solver.solve(robot, seed, "base_link", "tool0", pose)
    bad = dict(seed, shoulder_lift_joint=math.nan)
    with pytest.raises(ValueError, match="shoulder_lift_joint"):
        solver.solve(robot, bad, "base_link", "tool0", pose)
    with pytest.raises(ValueError, match="wrist_3_joint"):
        solver.solve(robot, q0 * np.array([1, 1, 1, 1, 1, math.inf]), "base_link", "tool0", pose)
    state = _State(names, np.where(np.arange(6) == 2, math.nan, q0))
    with pytest.raises(ValueError, match="elbow_joint"):
        solver.solve(robot, state, "base_link", "tool0", pose)
    missing = {n: v for n, v in seed.items() if n != "elbow_joint"}
    with pytest.raises(Exception, match="elbow_joint"):
        solver.solve(robot, missing, "base_link", "tool0", pose)
    nan_pose = pose.copy()
    nan_pose[1, 3] = math.nan
    with pytest.raises(InvalidTarget, match="NaN"):
        solver.solve(robot, seed, "base_link", "tool0", nan_pose)
    # Two bad arguments: the target is checked first, as on the general path.
    with pytest.raises(InvalidTarget, match="NaN"):
        solver.solve(robot, bad, "base_link", "tool0", nan_pose)
    with pytest.raises(InvalidTarget, match="NaN"):
        solver.solve(robot, state, "base_link", "tool0", nan_pose)
    skewed = pose.copy()
    skewed[0, 0] += 0.1
    with pytest.raises(InvalidTarget, match="orthonormal"):
        solver.solve(robot, seed, "base_link", "tool0", skewed)
    far = pose.copy()
    far[:3, 3] = [5.0, 0.0, 0.0]
    with pytest.raises(Unreachable) as caught:
        solver.solve(robot, seed, "base_link", "tool0", far)
    assert caught.value.distance > caught.value.reach
    assert set(caught.value.positions) >= set(names)
    with pytest.raises(UnknownLink):
        solver.solve(robot, seed, "base_link", "no_such_link", pose)
    # max_delta and seeds outside the limits still hold on the general path.
    step = solver.solve(robot, seed, "base_link", "tool0", chain.fk(q0 + 0.3), max_delta=0.01)
    assert np.max(np.abs(step.q - q0)) <= 0.01 + 1e-12
    outside = dict(seed, elbow_joint=float(chain.upper[2]) + 1.0)
    sol = solver.solve(robot, outside, "base_link", "tool0", pose)
    assert np.all(sol.q >= chain.lower) and np.all(sol.q <= chain.upper)


def test_changing_a_setting_drops_the_plans(load):
    robot = load("panda")
    source, tip = "panda_link0", "panda_hand_tcp"
    solver = DLSSolver()
    cases = list(_tracking_cases(robot, source, tip, count=5, seed=8))
    for _names, seed_q, pose in cases:
        solver.solve(robot, seed_q, source, tip, pose)
    assert solver._plans
    solver.orientation_weight = 1.5
    assert not solver._plans
    reference = DLSSolver(orientation_weight=1.5)
    for _names, seed_q, pose in cases:
        _same(
            solver.solve(robot, seed_q, source, tip, pose),
            reference.solve(robot, seed_q, source, tip, pose),
        )


def test_a_plan_belongs_to_its_robot_object(load):
    # Two equal robots loaded separately: each call reads its own robot's chain.
    first = load("ur5")
    second = load_urdf(ROBOTS / "ur5.urdf")
    solver = DLSSolver()
    q0 = np.array([0.1, -1.1, 1.3, -1.7, -1.5, 0.2])
    pose = first.path_between("base_link", "tool0").fk(q0 + 0.01)
    for robot in (first, second, first, second):
        sol = solver.solve(robot, q0, "base_link", "tool0", pose)
        plan = solver._plans[(id(robot), "base_link", "tool0")]
        assert plan.robot is robot
        assert plan.chain is robot.path_between("base_link", "tool0")
        assert sol.reached
