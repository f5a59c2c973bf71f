"""Damped least-squares steps for a whole batch, with the batch as the last (contiguous) axis.

``damped(cols, r, lam2)`` minimises ``|J dq - r|² + lam2 |dq|²`` per item through the
smaller normal matrix, like ``dls_step.dls_step``: ``(J Jᵀ + lam2 I) y = r, dq = Jᵀ y``
when there are at least as many columns as rows, else ``(Jᵀ J + lam2 I) dq = Jᵀ r``.
Jacobians come as (m, n, B). One ``einsum`` forms every item's normal matrix as
(size, size, B); the Cholesky factorisation and the two triangular solves are then
straight-line code on its contiguous (B,) rows, in the operation order of the scalar
step (so results match it to the last bit or so).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def damped(cols: Array, r: Array, lam2: Array) -> Array:
    """The damped steps (B, n) for Jacobians ``cols`` (m, n, B), errors ``r`` (B, m), ``lam2`` (B,).

    ``lam2`` must be positive (the normal matrices are then positive definite).
    """
    rows, n, _ = cols.shape
    rhs = np.ascontiguousarray(r.T)  # (m, B)
    if n >= rows:
        a = np.einsum("ikb,jkb->ijb", cols, cols)  # J Jᵀ: (m, m, B)
        _add_diagonal(a, lam2)
        y = _cholesky_solve(a, rhs)
        dq = np.einsum("ikb,ib->kb", cols, y)  # Jᵀ y: (n, B)
    else:
        a = np.einsum("ikb,ilb->klb", cols, cols)  # Jᵀ J: (n, n, B)
        _add_diagonal(a, lam2)
        dq = _cholesky_solve(a, np.einsum("ikb,ib->kb", cols, rhs))
    return np.ascontiguousarray(dq.T)


def _add_diagonal(a: Array, lam2: Array) -> None:
    for i in range(a.shape[0]):
        a[i, i] += lam2


def _cholesky_solve(a: Array, b: Array) -> Array:
    """Solve ``a x = b`` for (s, s, B) symmetric positive definite ``a`` and (s, B) ``b``.

    Straight-line over (B,) rows: each entry of the factor is one short expression.
    """
    size = a.shape[0]
    low: list[list[Array]] = [[] for _ in range(size)]  # the factor, row by row
    inv: list[Array] = []  # reciprocals of its diagonal
    for i in range(size):
        for j in range(i + 1):
            acc = a[i, j]
            for k in range(j):
                acc = acc - low[i][k] * low[j][k]
            if i == j:
                d = np.sqrt(acc)
                low[i].append(d)
                inv.append(1.0 / d)
            else:
                low[i].append(acc * inv[j])
    y: list[Array] = []
    for i in range(size):
        acc = b[i]
        for k in range(i):
            acc = acc - low[i][k] * y[k]
        y.append(acc * inv[i])
    x: list[Array] = [y[0]] * size
    for i in reversed(range(size)):
        acc = y[i]
        for k in range(i + 1, size):
            acc = acc - low[k][i] * x[k]
        x[i] = acc * inv[i]
    return np.array(x)
