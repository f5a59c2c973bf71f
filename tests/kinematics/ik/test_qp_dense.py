"""The dense QP solvers against daqp (an exact active-set QP solver) on random problems."""

from __future__ import annotations

import daqp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbot.kinematics.ik.qp.dense import QPStatus, solve_box_qp, solve_qp

BIG = 1e30


def _daqp(h_mat, f, g_mat, h_vec, lb, ub):
    n = f.shape[0]
    m = g_mat.shape[0]
    upper = np.concatenate([np.where(np.isfinite(ub), ub, BIG), h_vec])
    lower = np.concatenate([np.where(np.isfinite(lb), lb, -BIG), np.full(m, -BIG)])
    x, _, flag, _ = daqp.solve(h_mat, f, g_mat, upper, lower, np.zeros(n + m, dtype=np.intc))
    return x, flag


def _random_problem(rng, n, m, *, feasible_at_zero=True):
    a = rng.normal(size=(n + int(rng.integers(0, 3)), n))
    h_mat = a.T @ a + 1e-4 * np.eye(n)
    f = rng.normal(size=n) * 5.0
    lb = -rng.uniform(0.0, 1.0, n)
    ub = rng.uniform(0.0, 1.0, n)
    g_mat = rng.normal(size=(m, n))
    h_vec = rng.uniform(0.0, 1.0, m) if feasible_at_zero else rng.uniform(-1.0, 1.0, m)
    return h_mat, f, g_mat, h_vec, lb, ub


def _violation(x, g_mat, h_vec, lb, ub):
    worst = max(float(np.max(x - ub, initial=0.0)), float(np.max(lb - x, initial=0.0)))
    if g_mat.shape[0]:
        worst = max(worst, float(np.max(g_mat @ x - h_vec)))
    return worst


def test_box_path_matches_daqp_on_random_problems():
    rng = np.random.default_rng(11)
    for trial in range(400):
        n = int(rng.integers(1, 15))
        h_mat, f, _, _, lb, ub = _random_problem(rng, n, 0)
        if trial % 3 == 0:
            lb[rng.integers(n)] = -np.inf
        if trial % 4 == 0:
            ub[rng.integers(n)] = np.inf
        if trial % 5 == 0:
            k = rng.integers(n)
            lb[k] = ub[k] = rng.uniform(-0.5, 0.5)
        result = solve_box_qp(h_mat, f, lb, ub)
        expected, flag = _daqp(h_mat, f, np.zeros((0, n)), np.zeros(0), lb, ub)
        assert flag == 1
        assert result.status is QPStatus.OPTIMAL
        np.testing.assert_allclose(result.x, expected, atol=1e-6, rtol=0)
        # Exact box feasibility: no tolerance at all.
        assert np.all(result.x >= lb)
        assert np.all(result.x <= ub)


@pytest.mark.parametrize("feasible_at_zero", [True, False], ids=["zero-feasible", "any"])
def test_general_path_matches_daqp_on_random_problems(feasible_at_zero):
    rng = np.random.default_rng(12 + feasible_at_zero)
    compared = 0
    for _ in range(400):
        n = int(rng.integers(1, 15))
        m = int(rng.integers(1, 30))
        problem = _random_problem(rng, n, m, feasible_at_zero=feasible_at_zero)
        expected, flag = _daqp(*problem)
        result = solve_qp(*problem)
        if flag != 1:
            assert flag == -1  # daqp: infeasible
            assert result.status is QPStatus.INFEASIBLE
            continue
        compared += 1
        assert result.status is QPStatus.OPTIMAL
        np.testing.assert_allclose(result.x, expected, atol=1e-6, rtol=0)
        assert _violation(result.x, *problem[2:]) <= 1e-9
    assert compared > 100


def test_general_path_with_redundant_and_opposing_rows():
    rng = np.random.default_rng(13)
    for _ in range(100):
        n = int(rng.integers(2, 10))
        h_mat, f, g_mat, h_vec, lb, ub = _random_problem(rng, n, 6)
        # Duplicate rows, a scaled copy, and an equality written as two inequalities.
        g_mat = np.vstack([g_mat, g_mat[:2], 3.0 * g_mat[2:3], g_mat[3:4], -g_mat[3:4]])
        h_vec = np.concatenate([h_vec, h_vec[:2], 3.0 * h_vec[2:3], [0.1, -0.1]])
        expected, flag = _daqp(h_mat, f, g_mat, h_vec, lb, ub)
        result = solve_qp(h_mat, f, g_mat, h_vec, lb, ub)
        if flag != 1:
            assert result.status is QPStatus.INFEASIBLE
            continue
        np.testing.assert_allclose(result.x, expected, atol=1e-6, rtol=0)
        assert _violation(result.x, g_mat, h_vec, lb, ub) <= 1e-9


def test_active_rows_are_reported():
    h_mat = np.eye(2)
    f = np.array([-2.0, 0.0])  # unconstrained minimum at (2, 0)
    g_mat = np.array([[1.0, 0.0], [0.0, 1.0]])
    h_vec = np.array([1.0, 5.0])
    result = solve_qp(h_mat, f, g_mat, h_vec)
    np.testing.assert_allclose(result.x, [1.0, 0.0])
    assert result.active == (0,)


def test_infeasible_rows_are_reported_not_raised():
    h_mat = np.eye(1)
    f = np.zeros(1)
    result = solve_qp(h_mat, f, np.array([[1.0], [-1.0]]), np.array([-1.0, -1.0]))
    assert result.status is QPStatus.INFEASIBLE


def test_empty_box_is_infeasible():
    result = solve_box_qp(np.eye(2), np.zeros(2), np.array([0.0, 1.0]), np.array([1.0, 0.0]))
    assert result.status is QPStatus.INFEASIBLE
    result = solve_qp(np.eye(2), np.zeros(2), np.ones((1, 2)), np.ones(1), np.ones(2), -np.ones(2))
    assert result.status is QPStatus.INFEASIBLE


def test_unconstrained_minimum_inside_box_takes_no_iterations():
    result = solve_box_qp(np.eye(3), np.array([0.1, -0.1, 0.0]), -np.ones(3), np.ones(3))
    assert result.iterations == 0
    np.testing.assert_allclose(result.x, [-0.1, 0.1, 0.0])


@pytest.mark.parametrize(
    ("h_shape", "f_len", "b_len"),
    [((3, 2), 3, 3), ((3, 3), 3, 2)],
    ids=["hessian", "bounds"],
)
def test_shape_errors_name_the_argument(h_shape, f_len, b_len):
    with pytest.raises(ValueError, match=r"H|bounds"):
        solve_box_qp(np.eye(*h_shape), np.zeros(f_len), -np.ones(b_len), np.ones(b_len))


@pytest.mark.parametrize(
    ("lb", "ub"),
    [([np.nan, -1.0], [1.0, 1.0]), ([np.inf, -1.0], [np.inf, 1.0]), ([-1.0, -1.0], [1.0, -np.inf])],
    ids=["nan", "lower-plus-inf", "upper-minus-inf"],
)
def test_nonsense_bounds_are_rejected(lb, ub):
    with pytest.raises(ValueError, match="bounds must not"):
        solve_box_qp(np.eye(2), np.zeros(2), np.array(lb), np.array(ub))
    with pytest.raises(ValueError, match="bounds must not"):
        solve_qp(np.eye(2), np.zeros(2), np.ones((1, 2)), np.ones(1), np.array(lb), np.array(ub))


def test_g_without_h_is_rejected():
    with pytest.raises(ValueError, match="together"):
        solve_qp(np.eye(2), np.zeros(2), np.ones((1, 2)), None)
    with pytest.raises(ValueError, match="G must be"):
        solve_qp(np.eye(2), np.zeros(2), np.ones((1, 3)), np.ones(1))


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 12),
    m=st.integers(0, 12),
    scale=st.floats(1e-3, 1e3),
)
def test_bounds_and_rows_never_violated(seed, n, m, scale):
    rng = np.random.default_rng(seed)
    h_mat, f, g_mat, h_vec, lb, ub = _random_problem(rng, n, m)
    result = solve_qp(h_mat, f * scale, g_mat, h_vec, lb, ub)
    assert result.status is QPStatus.OPTIMAL
    assert np.all(result.x >= lb)
    assert np.all(result.x <= ub)
    assert _violation(result.x, g_mat, h_vec, lb, ub) <= 1e-9
