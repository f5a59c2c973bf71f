"""Pinned SPD solves for a large batch: a Cholesky factorisation written out as numpy code.

``pinned_cholesky(h_mat, f, pinned, held)`` returns, per problem, ``x`` with the held
variables at ``pinned`` and the free ones solving ``H_FF x_F = -f_F - H_FX x_X``: the
system ``qp_box`` solves every active-set round. ``numpy.linalg.solve`` factors
each of the B small matrices in its own LAPACK call (LU with pivoting); at B = 1000
7 x 7 systems that per-matrix cost is most of a round. Here the factorisation and the
two triangular solves are straight-line code over (B,) arrays, the batch the last,
contiguous axis, generated once per size ``n``: about 290 array operations for
``n = 7``, 2-3x faster than the stacked LAPACK solve from a few hundred problems up
(below that numpy's per-call cost wins, and the caller keeps LAPACK).

The held variables are masked inside the code: their rows and columns of ``H`` become
the identity's, which keeps the system symmetric positive definite (``H`` is), and
the held terms move to the right-hand side. A problem whose factorisation breaks
down (a pivot not positive in rounding: ``H`` nearly singular) gets NaN from the
code and is solved again by LAPACK, so every returned point is the pinned minimiser
to rounding. The source holds only indices.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]
MIN_BATCH = 300  # fewer problems: the stacked LAPACK solve is faster (numpy's per-call cost)


def pinned_cholesky(h_mat: Array, f: Array, pinned: Array, held: Mask) -> Array:
    """The pinned minimisers (B, n) of ``0.5 x'Hx + f'x`` with ``x[held] = pinned[held]``.

    Args:
        h_mat: (B, n, n) symmetric positive definite matrices.
        f: (B, n) linear terms.
        pinned: (B, n) values of the held variables (other entries are not read).
        held: (B, n) the held variables.
    """
    n = f.shape[1]
    p = np.where(held, pinned, 0.0)
    rhs = np.where(held, pinned, -f - np.einsum("bij,bj->bi", h_mat, p))
    free = (~held).T.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = _kernel(n)(h_mat.transpose(1, 2, 0).copy(), free, rhs.T.copy())
    # A held variable comes out as given: its pivot is 1 and its row and column of L 0.
    x: Array = np.ascontiguousarray(out.T)
    broken = np.flatnonzero(~np.isfinite(out).all(axis=0))
    if broken.size:  # a pivot lost to rounding: LAPACK's pivoted LU for those
        b = broken
        m = np.where(held[b][:, :, None], np.eye(n), h_mat[b])
        x[b] = np.linalg.solve(m, np.where(held[b], pinned[b], -f[b])[:, :, None])[:, :, 0]
        x[b] = np.where(held[b], pinned[b], x[b])
    return x


@functools.cache
def _kernel(n: int) -> Callable[[Array, Array, Array], Array]:
    """The generated solve for size ``n``: ``(h (n, n, B), free (n, B), rhs (n, B)) -> x``."""
    namespace: dict[str, object] = {"np": np}
    exec(compile(_source(n), f"<hilbot pinned cholesky {n}>", "exec"), namespace)  # indices only
    kernel: Callable[[Array, Array, Array], Array] = namespace["solve"]  # type: ignore[assignment]
    return kernel


def _source(n: int) -> str:
    """Cholesky ``M = L L'`` of the masked matrix, then ``L y = b`` and ``L' x = y``.

    ``M`` has ``H``'s entries where both variables are free and the identity's where
    either is held: a held pivot is 1 (``d * free + (1 - free)``) and a held row or
    column of ``L`` is 0 (both factors ``free``). ``r_j`` is ``1 / L_jj``.
    """
    lines = ["def solve(h, free, b):", "    sqrt = np.sqrt", "    out = np.empty_like(b)"]
    for j in range(n):
        pivot = f"h[{j}, {j}]" + "".join(f" - l{j}_{k} * l{j}_{k}" for k in range(j))
        lines += [
            f"    d = ({pivot}) * free[{j}]",
            "    d += 1.0",
            f"    d -= free[{j}]",
            f"    r{j} = 1.0 / sqrt(d)",
            f"    rf = r{j} * free[{j}]",
        ]
        for i in range(j + 1, n):
            entry = f"h[{i}, {j}]" + "".join(f" - l{i}_{k} * l{j}_{k}" for k in range(j))
            lines += [f"    l{i}_{j} = ({entry}) * rf", f"    l{i}_{j} *= free[{i}]"]
    for i in range(n):
        terms = "".join(f" - l{i}_{k} * y{k}" for k in range(i))
        lines.append(f"    y{i} = (b[{i}]{terms}) * r{i}")
    for i in reversed(range(n)):
        terms = "".join(f" - l{k}_{i} * out[{k}]" for k in range(i + 1, n))
        lines.append(f"    np.multiply(y{i}{terms}, r{i}, out=out[{i}])")
    lines.append("    return out")
    return "\n".join(lines) + "\n"


__all__ = ["MIN_BATCH", "pinned_cholesky"]
