"""Shared fixtures for the kinematics tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hilbot.kinematics import Chain, JointType


def _random_q(chain: Chain, rng: np.random.Generator, batch: int | None = None) -> np.ndarray:
    shape = (batch, chain.dof) if batch is not None else (chain.dof,)
    lo = np.where(np.isfinite(chain.lower), chain.lower, -np.pi)
    hi = np.where(np.isfinite(chain.upper), chain.upper, np.pi)
    q = rng.uniform(lo, hi, size=shape)
    for j in chain.joints:
        c = chain.jacobian_columns.index((j.name, 0))
        if j.type is JointType.FLOATING:
            q[..., c : c + 3] = rng.uniform(-1.0, 1.0, size=(*shape[:-1], 3))
            axis = rng.normal(size=(*shape[:-1], 3))
            axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
            q[..., c + 3 : c + 6] = axis * rng.uniform(0.0, np.pi, size=(*shape[:-1], 1))
        elif j.type is JointType.PLANAR:
            q[..., c : c + 2] = rng.uniform(-1.0, 1.0, size=(*shape[:-1], 2))
    return q


@pytest.fixture
def random_q() -> Callable[..., np.ndarray]:
    """``random_q(chain, rng, batch=None)``: configurations inside the limits.

    Unbounded coordinates are drawn in [-pi, pi]; floating joints get |p| < 1 m and any
    rotation, planar joints |x|, |y| < 1 m.
    """
    return _random_q
