"""The stacked QP solvers against the scalar ones they reproduce (qp.dense)."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics.ik.batch.qp_box import solve_box_batch
from hilbot.kinematics.ik.batch.qp_dense import STATUSES, solve_qp_batch
from hilbot.kinematics.ik.qp.dense import QPStatus, solve_box_qp, solve_qp


def _problems(rng, size, n, damping):
    """IK-like QPs: H = A'A + damping I with A (6, n), so redundant arms are ill-conditioned."""
    a = rng.normal(size=(size, 6, n))
    h_mat = a.transpose(0, 2, 1) @ a
    h_mat[:, np.arange(n), np.arange(n)] += damping
    f = rng.normal(size=(size, n)) * rng.choice([0.01, 1.0, 30.0], size=(size, 1))
    lo = -rng.uniform(0.0, 0.05, (size, n))
    hi = rng.uniform(0.0, 0.05, (size, n))
    pinned = rng.random((size, n)) < 0.1  # lo == hi == 0: a limit holding a joint
    lo[pinned] = hi[pinned] = 0.0
    return h_mat, f, lo, hi


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize(("n", "damping"), [(6, 1e-6), (7, 1e-9), (4, 1e-3)])
def test_box_batch_equals_the_scalar_solver(n, damping, exact):
    rng = np.random.default_rng(n)
    h_mat, f, lo, hi = _problems(rng, 400, n, damping)
    out = solve_box_batch(h_mat, f, lo, hi, exact=exact)
    assert ((out.x >= lo) & (out.x <= hi)).all()  # the box, exactly
    for b in range(400):
        scalar = solve_box_qp(h_mat[b], f[b], lo[b], hi[b])
        if exact:
            np.testing.assert_array_equal(out.x[b], scalar.x)
            assert out.capped[b] == (scalar.iterations > 0)
        else:
            np.testing.assert_allclose(out.x[b], scalar.x, rtol=0, atol=1e-9)


def test_box_batch_warm_start_changes_nothing_but_the_work():
    rng = np.random.default_rng(3)
    h_mat, f, lo, hi = _problems(rng, 300, 7, 1e-9)
    cold = solve_box_batch(h_mat, f, lo, hi)
    wrong = (rng.random(lo.shape) < 0.5, rng.random(lo.shape) < 0.3)
    warm = solve_box_batch(h_mat, f, lo, hi, (wrong[0], wrong[1] & ~wrong[0]))
    np.testing.assert_array_equal(cold.x, warm.x)


def test_qp_batch_equals_the_scalar_solver_with_rows():
    rng = np.random.default_rng(7)
    n, size = 7, 200
    h_mat, f, lo, hi = _problems(rng, size, n, 1e-9)
    m = 3
    g = rng.normal(size=(size, m, n))
    h = rng.uniform(-0.01, 0.02, (size, m))
    rows = rng.integers(1, m + 1, size)
    for b in range(size):  # padding rows past rows[b]
        g[b, rows[b] :] = 0.0
        h[b, rows[b] :] = np.inf
    g[:5, 1] = g[:5, 0]  # a repeated row
    h[:5, 1] = h[:5, 0]
    out = solve_qp_batch(h_mat, f, g, h, rows, lo, hi)
    infeasible = 0
    for b in range(size):
        k = int(rows[b])
        scalar = solve_qp(h_mat[b], f[b], g[b, :k], h[b, :k], lo[b], hi[b])
        assert STATUSES[out.status[b]] is scalar.status
        assert out.iterations[b] == scalar.iterations
        np.testing.assert_array_equal(out.x[b], scalar.x)
        infeasible += scalar.status is QPStatus.INFEASIBLE
    assert 0 < infeasible < size  # both kinds occur
