"""The generated batched Cholesky against LAPACK's pinned solves (ik.batch.cholesky)."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics.ik.batch.cholesky import MIN_BATCH, pinned_cholesky


def _lapack(h_mat, f, pinned, held):
    n = f.shape[1]
    m = np.where(held[:, :, None], np.eye(n), h_mat)
    x = np.linalg.solve(m, np.where(held, pinned, -f)[:, :, None])[:, :, 0]
    return np.where(held, pinned, x)


def _spd(rng, size, n, damping):
    a = rng.normal(size=(size, max(n - 1, 1), n))
    h_mat = a.transpose(0, 2, 1) @ a
    h_mat[:, np.arange(n), np.arange(n)] += damping
    return h_mat


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 8])
def test_pinned_solves_equal_lapacks(n):
    rng = np.random.default_rng(n)
    size = MIN_BATCH + 100
    h_mat = _spd(rng, size, n, 0.1)  # well conditioned: agreement to rounding
    f = rng.normal(size=(size, n))
    pinned = rng.normal(size=(size, n))
    held = rng.random((size, n)) < 0.4
    held[0], held[1] = True, False  # every variable held; none held
    x = pinned_cholesky(h_mat, f, pinned, held)
    np.testing.assert_array_equal(x[held], pinned[held])  # exactly on their values
    np.testing.assert_allclose(x, _lapack(h_mat, f, pinned, held), rtol=1e-10, atol=1e-12)


def test_ill_conditioned_solves_meet_their_equations():
    """IK's Hessians: a redundant arm's J'J plus 1e-9, condition numbers near 1e9."""
    rng = np.random.default_rng(0)
    size, n = 1000, 7
    h_mat = _spd(rng, size, n, 1e-9)
    f = rng.normal(size=(size, n))
    pinned = rng.uniform(-0.02, 0.02, (size, n))
    held = rng.random((size, n)) < 0.3
    x = pinned_cholesky(h_mat, f, pinned, held)
    residual = np.where(held, 0.0, np.einsum("bij,bj->bi", h_mat, x) + f)  # free rows: 0
    scale = np.abs(h_mat).max(axis=(1, 2)) * np.abs(x).max(axis=1) + np.abs(f).max(axis=1)
    assert (np.abs(residual).max(axis=1) <= 1e-10 * scale).all()  # backward stable


def test_a_broken_factorisation_is_solved_again_by_lapack():
    """A pivot not positive gives NaN in the generated code; that problem goes to LAPACK."""
    rng = np.random.default_rng(1)
    size, n = MIN_BATCH, 3
    h_mat = _spd(rng, size, n, 0.1)
    h_mat[5] = [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]  # indefinite, invertible
    f = rng.normal(size=(size, n))
    pinned = np.zeros((size, n))
    held = np.zeros((size, n), dtype=bool)
    x = pinned_cholesky(h_mat, f, pinned, held)
    assert np.isfinite(x).all()
    np.testing.assert_allclose(x, _lapack(h_mat, f, pinned, held), rtol=1e-10, atol=1e-12)
