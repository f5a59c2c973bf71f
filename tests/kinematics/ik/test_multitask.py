"""MultiTaskSolver: bimanual and hexapod tasks, hints, posture, reach clamp, self-collision."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilbot.kinematics import load_urdf
from hilbot.kinematics.errors import NotAnAncestor, UnknownLink
from hilbot.kinematics.ik.core.solution import Status
from hilbot.kinematics.ik.multitask.collision import CollisionDataError, load_self_collision
from hilbot.kinematics.ik.multitask.model import TreeContext, TreeModel
from hilbot.kinematics.ik.multitask.multitask_solver import MultiTaskSolver
from hilbot.kinematics.ik.multitask.tasks import (
    ElbowHint,
    FrameTask,
    JointLimitTask,
    ManipulabilityTask,
    PostureTask,
    RelativeFrameTask,
    RestTask,
    SelfCollision,
)
from hilbot.kinematics.ik.multitask.terms import log_manipulability
from hilbot.kinematics.ik.qp.limits import CollisionAvoidance, VelocityLimit

ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"
HOME = {
    f"{side}_joint{i}": value
    for side in ("left", "right")
    for i, value in zip(range(1, 7), (0.0, -0.5, 0.8, 0.0, 0.6, 0.0), strict=True)
}
FEET = [f"leg{i}_foot" for i in range(1, 7)]


@pytest.fixture(scope="module")
def bimanual():
    robot = load_urdf(ROBOTS / "bimanual.urdf")
    return robot, TreeModel(robot, "torso")


@pytest.fixture(scope="module")
def hexapod():
    return load_urdf(ROBOTS / "hexapod.urdf")


def _pose(model, q, link):
    return TreeContext(model, q).pose(link)


def test_both_arms_reach_their_targets_in_one_call(bimanual):
    robot, model = bimanual
    solver = MultiTaskSolver()
    rng = np.random.default_rng(30)
    for _ in range(10):
        q_true = rng.uniform(-1.0, 1.0, model.nv)
        seed = q_true + rng.uniform(-0.3, 0.3, model.nv)
        tasks = [
            FrameTask("left_tool", _pose(model, q_true, "left_tool")),
            FrameTask("right_tool", _pose(model, q_true, "right_tool")),
        ]
        solution = solver.solve_tasks(robot, seed, tasks, root_link="torso", max_iterations=100)
        assert solution.reached, solution
        assert solution.status is Status.CONVERGED
        for task in tasks:
            reached = _pose(model, solution.q, task.link)
            np.testing.assert_allclose(reached[:3, 3], task.parsed.position, atol=1e-4)
        assert np.all(solution.q >= model.lower) and np.all(solution.q <= model.upper)


def test_state_mapping_in_and_positions_out(bimanual):
    robot, model = bimanual
    state = dict(HOME)
    state["extra_joint"] = 1.5  # not on the tree: comes back unchanged
    target = _pose(model, model.read(HOME)[0] + 0.1, "left_tool")[:3, 3]
    solution = MultiTaskSolver().solve_tasks(
        robot, state, [FrameTask("left_tool", target)], root_link="torso"
    )
    assert solution.reached
    assert solution.positions["extra_joint"] == 1.5
    assert set(solution.positions) == set(state)


def test_elbow_hint_moves_the_elbow(bimanual):
    robot, model = bimanual
    q0 = model.read(HOME)[0]
    target = _pose(model, q0, "left_tool")[:3, 3] + np.array([0.0, 0.05, 0.05])
    hint = np.array([-0.3, 0.3, 0.45])
    tasks = [FrameTask("left_tool", target)]
    plain = MultiTaskSolver().solve_tasks(robot, q0, tasks, root_link="torso")
    hinted = MultiTaskSolver().solve_tasks(
        robot, q0, [*tasks, ElbowHint("left_link3", hint, weight=0.5)], root_link="torso"
    )
    assert plain.reached and hinted.reached
    before = np.linalg.norm(_pose(model, plain.q, "left_link3")[:3, 3] - hint)
    after = np.linalg.norm(_pose(model, hinted.q, "left_link3")[:3, 3] - hint)
    assert after < before - 0.02


def test_posture_pulls_towards_home_in_the_null_space(bimanual):
    robot, model = bimanual
    home = model.read(HOME)[0]
    rng = np.random.default_rng(31)
    seed = home + rng.uniform(-0.5, 0.5, model.nv)
    target = _pose(model, seed, "left_tool")[:3, 3]  # already met at the seed
    left = [model.names.index(f"left_joint{i}") for i in range(1, 7)]
    solver = MultiTaskSolver(posture=HOME, posture_weight=0.1)
    solution = solver.solve_tasks(
        robot, seed, [FrameTask("left_tool", target)], root_link="torso", max_iterations=100
    )
    assert solution.reached  # the target stays met...
    before = np.linalg.norm(seed[left] - home[left])
    after = np.linalg.norm(solution.q[left] - home[left])
    assert after < 0.8 * before  # ...while the arm moved towards home
    solver.set_posture(None)
    assert solver.posture is None


def test_rest_task_holds_the_arm_near_the_start(bimanual):
    robot, model = bimanual
    home = model.read(HOME)[0]
    seed = home + np.random.default_rng(34).uniform(-0.5, 0.5, model.nv)
    target = _pose(model, seed, "left_tool")[:3, 3] + np.array([0.03, 0.0, 0.02])
    tasks = [FrameTask("left_tool", target), PostureTask(HOME, weight=0.1)]
    loose = MultiTaskSolver().solve_tasks(robot, seed, tasks, root_link="torso")
    held = MultiTaskSolver().solve_tasks(
        robot, seed, [*tasks, RestTask(weight=1.0)], root_link="torso"
    )
    assert loose.reached and held.reached
    assert np.linalg.norm(held.q - seed) < 0.5 * np.linalg.norm(loose.q - seed)


def test_max_reach_clamps_the_target_along_the_line(bimanual):
    robot, model = bimanual
    q0 = model.read(HOME)[0]
    base = model.base_point("left_tool", q0)
    far = base + np.array([0.0, 2.0, 0.3])
    solution = MultiTaskSolver(max_reach=0.4).solve_tasks(
        robot, q0, [FrameTask("left_tool", far)], root_link="torso", max_iterations=100
    )
    assert solution.reached
    tip = _pose(model, solution.q, "left_tool")[:3, 3]
    expected = base + (far - base) / np.linalg.norm(far - base) * 0.4
    np.testing.assert_allclose(tip, expected, atol=1e-4)


@pytest.mark.parametrize("root", ["base_link", "world"], ids=["fixed-base", "free-base"])
def test_hexapod_six_feet_at_once(hexapod, root):
    model = TreeModel(hexapod, root)
    rng = np.random.default_rng(32)
    q_goal = np.zeros(model.nv)
    legs = slice(6, None) if root == "world" else slice(None)
    q_goal[legs] = rng.uniform(-0.3, 0.3, q_goal[legs].shape)
    if root == "world":
        q_goal[:3] = [0.02, -0.01, 0.05]  # the body shifted and raised
    tasks = [FrameTask(foot, _pose(model, q_goal, foot)[:3, 3]) for foot in FEET]
    if root == "world":
        tasks.append(FrameTask("base_link", _pose(model, q_goal, "base_link")))
    solution = MultiTaskSolver().solve_tasks(
        hexapod, np.zeros(model.nv), tasks, root_link=root, max_iterations=100
    )
    assert solution.reached
    for task in tasks:
        np.testing.assert_allclose(
            _pose(model, solution.q, task.link)[:3, 3], task.parsed.position, atol=1e-4
        )
    if root == "world":
        assert set(solution.positions) >= {"base_floating", "leg6_tibia"}
        assert np.asarray(solution.positions["base_floating"]).shape == (6,)


def test_relative_pose_between_two_hands(bimanual):
    """Two hands hold one object: the right hand goes to a pose, the left keeps its grip."""
    robot, model = bimanual
    q_grip = model.read(HOME)[0] + np.array([0.3, 0.2, -0.2, 0.1, 0.2, 0.0] * 2)
    grip = np.linalg.inv(_pose(model, q_grip, "right_tool")) @ _pose(model, q_grip, "left_tool")
    q_goal = q_grip + np.random.default_rng(33).uniform(-0.15, 0.15, model.nv)
    right_goal = _pose(model, q_goal, "right_tool")  # reachable with the same grip
    left_goal = right_goal @ grip
    if np.linalg.norm(left_goal[:3, 3] - _pose(model, q_goal, "left_tool")[:3, 3]) < 1e-3:
        pytest.skip("degenerate case")
    tasks = [
        FrameTask("right_tool", right_goal),
        RelativeFrameTask("left_tool", "right_tool", grip),
    ]
    solution = MultiTaskSolver().solve_tasks(
        robot, q_grip, tasks, root_link="torso", max_iterations=100
    )
    left = _pose(model, solution.q, "left_tool")
    right = _pose(model, solution.q, "right_tool")
    assert solution.reached, solution
    np.testing.assert_allclose(right[:3, 3], right_goal[:3, 3], atol=1e-4)
    np.testing.assert_allclose((np.linalg.inv(right) @ left)[:3, 3], grip[:3, 3], atol=1e-4)
    np.testing.assert_allclose((np.linalg.inv(right) @ left)[:3, :3], grip[:3, :3], atol=1e-2)


def test_self_collision_keeps_the_arms_apart(bimanual):
    robot, model = bimanual
    collision = load_self_collision("bimanual_collision.yaml")
    q0 = model.read(HOME)[0]
    right_forearm = _pose(model, q0, "right_link3")
    # A left-hand target inside the right forearm; the right arm holds its pose.
    target = right_forearm[:3, :3] @ np.array([0.09, 0.0, 0.0]) + right_forearm[:3, 3]
    tasks = [
        FrameTask("left_tool", target),
        FrameTask("right_tool", _pose(model, q0, "right_tool")),
        collision,
    ]
    solution = MultiTaskSolver().solve_tasks(robot, q0, tasks, root_link="torso", max_iterations=80)
    limit = CollisionAvoidance(collision.pairs, margin=collision.margin)
    distances = limit.distances(TreeContext(model, solution.q))
    assert min(distances) >= collision.margin - 1e-3
    assert not solution.reached
    # Without the pairs the hand goes into the other arm.
    free = MultiTaskSolver().solve_tasks(robot, q0, tasks[:2], root_link="torso")
    assert min(limit.distances(TreeContext(model, free.q))) < 0.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    max_joint_delta=st.one_of(st.none(), st.floats(0.001, 0.3)),
    scale=st.floats(0.0, 1.5),
)
def test_limits_and_max_joint_delta_never_violated(bimanual, seed, max_joint_delta, scale):
    robot, model = bimanual
    rng = np.random.default_rng(seed)
    q0 = rng.uniform(np.maximum(model.lower, -2.0), np.minimum(model.upper, 2.0))
    tasks = [
        FrameTask("left_tool", rng.normal(size=3) * scale),
        FrameTask("right_tool", (rng.normal(size=3) * scale, rng.normal(size=3))),
        PostureTask(HOME),
        RestTask(),
    ]
    solution = MultiTaskSolver().solve_tasks(
        robot, q0, tasks, root_link="torso", max_joint_delta=max_joint_delta, max_iterations=10
    )
    assert np.all(solution.q >= model.lower) and np.all(solution.q <= model.upper)
    if max_joint_delta is not None:
        assert np.max(np.abs(solution.q - q0)) <= max_joint_delta + 1e-12


def test_one_weighted_sum_mode_reaches_too(bimanual):
    robot, model = bimanual
    q0 = model.read(HOME)[0]
    target = _pose(model, q0 + 0.2, "left_tool")[:3, 3]
    solver = MultiTaskSolver(prioritized=False, posture=HOME, posture_weight=1e-3)
    solution = solver.solve_tasks(
        robot, q0, [FrameTask("left_tool", target)], root_link="torso", tolerance=1e-3
    )
    assert solution.reached


def test_velocity_limit_bounds_each_iteration(bimanual):
    robot, model = bimanual
    q0 = model.read(HOME)[0]
    target = _pose(model, q0 + 0.5, "left_tool")
    solution = MultiTaskSolver([VelocityLimit(dt=0.01)]).solve_tasks(
        robot, q0, [FrameTask("left_tool", target)], root_link="torso", max_iterations=1
    )
    assert np.all(np.abs(solution.q - q0) <= model.velocity_limit * 0.01 + 1e-12)
    assert solution.status is Status.TIMEOUT


def test_the_shared_solve_call_works(bimanual):
    robot, _ = bimanual
    chain = robot.path_between("torso", "right_tool")
    q_true = np.array([0.2, -0.4, 0.7, 0.1, 0.5, -0.2])
    solution = MultiTaskSolver(posture=HOME).solve(
        robot, dict(HOME), "torso", "right_tool", chain.fk(q_true), max_iterations=100
    )
    assert solution.reached
    np.testing.assert_allclose(chain.fk(solution.q)[:3, 3], chain.fk(q_true)[:3, 3], atol=1e-4)


def test_manipulability_task_raises_manipulability(bimanual):
    robot, model = bimanual
    q0 = model.read(HOME)[0]
    q0[model.names.index("left_joint3")] = 0.05  # nearly stretched: low manipulability
    task = ManipulabilityTask("left_tool", weight=0.05)
    solution = MultiTaskSolver().solve_tasks(
        robot, q0, [task], root_link="torso", max_iterations=20
    )
    assert log_manipulability(model, solution.q, "left_tool") > log_manipulability(
        model, q0, "left_tool"
    )


def test_joint_limit_task_pushes_out_of_the_band(bimanual):
    robot, model = bimanual
    q0 = model.read(HOME)[0]
    i = model.names.index("left_joint2")
    q0[i] = model.upper[i] - 0.01
    solution = MultiTaskSolver().solve_tasks(
        robot, q0, [JointLimitTask(weight=0.5, margin=0.2)], root_link="torso", max_iterations=30
    )
    assert solution.q[i] < model.upper[i] - 0.1


@pytest.mark.parametrize(
    ("build", "word"),
    [
        (lambda: FrameTask("", [0, 0, 0]), "link"),
        (lambda: FrameTask("a", [0, 0, 0], position_weight=-1.0), "position_weight"),
        (lambda: FrameTask("a", [0, 0, 0], position_weight=0, orientation_weight=0), "both 0"),
        (lambda: FrameTask("a", [np.nan, 0, 0]), "NaN"),
        (lambda: RelativeFrameTask("a", "a", np.eye(4)), "both"),
        (lambda: ElbowHint("a", [0, 0]), "position"),
        (lambda: PostureTask({"j": float("inf")}), "finite"),
        (lambda: RestTask(weight=0.0), "weight"),
        (lambda: ManipulabilityTask("a", weight=-1), "weight"),
        (lambda: JointLimitTask(margin=0.0), "margin"),
        (lambda: SelfCollision(()), "no pairs"),
    ],
    ids=[
        "link",
        "weight",
        "no-weight",
        "nan-target",
        "same-links",
        "hint-shape",
        "posture",
        "rest",
        "manip",
        "margin",
        "pairs",
    ],
)
def test_tasks_are_validated(build, word):
    with pytest.raises(ValueError, match=word):
        build()


def test_unknown_link_and_bad_options(bimanual):
    robot, _ = bimanual
    solver = MultiTaskSolver()
    with pytest.raises(UnknownLink) as unknown:
        solver.solve_tasks(robot, dict(HOME), [FrameTask("nowhere", [0, 0, 0])], root_link="torso")
    assert unknown.value.link == "nowhere"
    with pytest.raises(NotAnAncestor) as outside:
        solver.solve_tasks(robot, dict(HOME), [FrameTask("world", [0, 0, 0])], root_link="torso")
    assert outside.value.source == "torso"
    with pytest.raises(ValueError, match="max_joint_delta"):
        solver.solve_tasks(robot, dict(HOME), [], root_link="torso", max_joint_delta=0.0)
    with pytest.raises(ValueError, match="not a task"):
        solver.solve_tasks(robot, dict(HOME), ["left_tool"], root_link="torso")
    with pytest.raises(KeyError, match="no position"):
        solver.solve_tasks(robot, {"left_joint1": 0.0}, [], root_link="torso")


def test_collision_data_errors_name_the_field():
    with pytest.raises(CollisionDataError) as info:
        load_self_collision({"capsules": {"a": {"link": "x"}}, "pairs": [["a", "a"]]})
    assert info.value.field == "capsules.a"
    with pytest.raises(CollisionDataError) as info:
        load_self_collision(
            {"capsules": {"a": {"link": "x", "radius": 0.1}}, "pairs": [["a", "b"]]}
        )
    assert info.value.field == "pairs[0]"
