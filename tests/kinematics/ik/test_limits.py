"""Limit objects: their box bounds and rows, geometry, and Jacobians against finite differences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hilbot.kinematics import load_urdf
from hilbot.kinematics.errors import UnknownLink
from hilbot.kinematics.ik.qp.limits import (
    Capsule,
    CollisionAvoidance,
    ConfigurationLimit,
    LinearInequality,
    Sphere,
    VelocityLimit,
    closest_points,
    point_jacobian,
)
from hilbot.kinematics.ik.qp.limits.geometry import closest_points_batch
from hilbot.kinematics.ik.qp.qp_solver import ChainContext

ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"


@pytest.fixture(scope="module")
def ur5():
    robot = load_urdf(ROBOTS / "ur5.urdf")
    return robot.path_between("base_link", "tool0")


def _context(chain, q):
    names = tuple(name for name, _ in chain.jacobian_columns)
    return ChainContext(chain, np.asarray(q, dtype=float), names)


def test_configuration_limit_box_is_a_gain_times_the_distance(ur5):
    q = (ur5.lower + ur5.upper) / 2 + 0.1
    part = ConfigurationLimit(gain=0.5).constraint(_context(ur5, q))
    np.testing.assert_allclose(part.lower, 0.5 * (ur5.lower - q))
    np.testing.assert_allclose(part.upper, 0.5 * (ur5.upper - q))
    assert part.g is None


def test_configuration_limit_margin_and_seed_outside():
    lower, upper = np.array([-1.0, -1.0]), np.array([1.0, 1.0])

    class Ctx:
        q = np.array([1.5, -0.95])
        names = ("a", "b")
        velocity_limit = np.array([1.0, 1.0])

    Ctx.lower, Ctx.upper = lower, upper
    part = ConfigurationLimit(gain=1.0, min_distance_from_limits=0.1).constraint(Ctx())
    # Joint a is beyond its upper limit: it may stay or move back, never further out.
    assert part.upper[0] == 0.0
    assert part.lower[0] == pytest.approx(-2.4)
    # Joint b sits inside the margin at the lower end: it may stay, never go lower.
    assert part.lower[1] == 0.0
    assert part.upper[1] == pytest.approx(1.85)


@pytest.mark.parametrize("gain", [0.0, 1.5, float("nan")], ids=["zero", "above-one", "nan"])
def test_configuration_limit_rejects_bad_gain(gain):
    with pytest.raises(ValueError, match="gain"):
        ConfigurationLimit(gain=gain)


def test_velocity_limit_uses_model_limits_and_overrides(ur5):
    names = tuple(name for name, _ in ur5.jacobian_columns)
    limit = VelocityLimit({names[0]: 0.5}, dt=0.02)
    part = limit.constraint(_context(ur5, np.zeros(ur5.dof)))
    expected = ur5.velocity_limit * 0.02
    expected[0] = 0.01
    np.testing.assert_allclose(part.upper, expected)
    np.testing.assert_allclose(part.lower, -expected)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [({"dt": 0.0}, "dt"), ({"velocities": {"j": -1.0}, "dt": 0.1}, "velocity of 'j'")],
    ids=["dt", "velocity"],
)
def test_velocity_limit_rejects_bad_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        VelocityLimit(**kwargs)


def test_linear_inequality_checks_shapes_and_columns(ur5):
    with pytest.raises(ValueError, match="G must be"):
        LinearInequality(np.ones((2, 6)), np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        LinearInequality(np.ones((1, 6)), [np.nan])
    with pytest.raises(ValueError, match="on must be"):
        LinearInequality(np.ones((1, 6)), [1.0], on="q")
    shifted = LinearInequality(np.ones((1, 6)), [1.0], on="configuration")
    part = shifted.constraint(_context(ur5, np.full(6, 0.1)))
    assert part.h[0] == pytest.approx(1.0 - 0.6)
    limit = LinearInequality(np.ones((1, 5)), [1.0])
    with pytest.raises(ValueError, match="5 columns but the solve has 6"):
        limit.constraint(_context(ur5, np.zeros(6)))


def test_closest_points_match_dense_sampling():
    rng = np.random.default_rng(3)
    s = np.linspace(0.0, 1.0, 201)
    for _ in range(100):
        p1, q1, p2, q2 = rng.normal(size=(4, 3))
        if rng.random() < 0.2:
            q2 = p2.copy()  # a point
        a, b = closest_points(p1, q1, p2, q2)
        sampled_a = p1 + s[:, None] * (q1 - p1)
        sampled_b = p2 + s[:, None] * (q2 - p2)
        brute = np.min(np.linalg.norm(sampled_a[:, None] - sampled_b[None], axis=2))
        assert np.linalg.norm(a - b) <= brute + 1e-12
        assert np.linalg.norm(a - b) >= brute - 2e-2


def test_point_jacobian_matches_finite_differences(ur5):
    rng = np.random.default_rng(4)
    q = rng.uniform(-2, 2, ur5.dof)
    link = "wrist_2_link"
    offset = np.array([0.03, -0.02, 0.05])
    ctx = _context(ur5, q)
    pose = ctx.pose(link)
    jac = point_jacobian(ctx.jacobian(link), pose[:3, 3], pose[:3, :3] @ offset + pose[:3, 3])
    eps = 1e-6
    for i in range(ur5.dof):
        dq = np.zeros(ur5.dof)
        dq[i] = eps
        plus = _context(ur5, q + dq).pose(link)
        minus = _context(ur5, q - dq).pose(link)
        fd = (plus[:3, :3] @ offset + plus[:3, 3] - minus[:3, :3] @ offset - minus[:3, 3]) / (
            2 * eps
        )
        np.testing.assert_allclose(jac[:, i], fd, atol=1e-8)


def test_collision_row_is_the_distance_derivative(ur5):
    wrist = Capsule("wrist_3_link", 0.04, (0, 0, -0.05), (0, 0, 0.05))
    base = Capsule("base_link", 0.06, (0, 0, 0), (0, 0, 0.1))
    limit = CollisionAvoidance([(wrist, base)], margin=0.01, detection_distance=5.0, gain=1.0)
    rng = np.random.default_rng(5)
    for _ in range(10):
        q = rng.uniform(-2, 2, ur5.dof)
        ctx = _context(ur5, q)
        part = limit.constraint(ctx)
        (distance,) = limit.distances(ctx)
        assert part.h[0] == pytest.approx(distance - 0.01)
        dq = rng.normal(size=ur5.dof) * 1e-6
        (moved,) = limit.distances(_context(ur5, q + dq))
        # Row: -d'(q) dq <= h, so d(q + dq) - d(q) = -row . dq to first order.
        assert moved - distance == pytest.approx(-part.g[0] @ dq, abs=1e-10)


def test_collision_pairs_beyond_detection_give_no_rows(ur5):
    a = Sphere("wrist_3_link", 0.01)
    b = Sphere("base_link", 0.01)
    part = CollisionAvoidance([(a, b)], detection_distance=0.02).constraint(
        _context(ur5, np.zeros(6))
    )
    assert part.g is None


def test_collision_avoidance_validates():
    a = Sphere("x", 0.1)
    with pytest.raises(ValueError, match="two links"):
        CollisionAvoidance([(a, Sphere("x", 0.2))])
    with pytest.raises(ValueError, match="detection_distance"):
        CollisionAvoidance([(a, Sphere("y", 0.2))], margin=0.2, detection_distance=0.1)
    with pytest.raises(ValueError, match="Capsule"):
        CollisionAvoidance([(a, "y")])


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (("", 0.1), "link"),
        (("l", 0.0), "radius"),
        (("l", 0.1, (0, 0)), "a must be"),
        (("l", 0.1, (0, 0, 0), (0, np.inf, 0)), "b must be"),
    ],
    ids=["link", "radius", "a-shape", "b-finite"],
)
def test_capsule_validates(args, word):
    with pytest.raises(ValueError, match=word):
        Capsule(*args)


def test_unknown_link_names_the_chain_links(ur5):
    ctx = _context(ur5, np.zeros(6))
    with pytest.raises(UnknownLink) as info:
        ctx.pose("left_tool")
    assert info.value.link == "left_tool"
    assert "wrist_3_link" in info.value.known


def test_batched_closest_points_match_the_scalar_version():
    rng = np.random.default_rng(6)
    p1, q1, p2, q2 = rng.normal(size=(4, 400, 3))
    q1[:40] = p1[:40]  # points
    q2[20:60] = p2[20:60]
    q2[100:140] = p2[100:140] + (q1[100:140] - p1[100:140])  # parallel segments
    a, b = closest_points_batch(p1, q1, p2, q2)
    for k in range(400):
        x, y = closest_points(p1[k], q1[k], p2[k], q2[k])
        assert np.linalg.norm(a[k] - b[k]) == pytest.approx(np.linalg.norm(x - y), abs=1e-12)
