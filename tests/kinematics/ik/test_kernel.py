"""The generated FK + Jacobian kernels and the unrolled damped least-squares step."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics.codegen.dls_step import dls_step
from hilbot.kinematics.codegen.scalar_kernel import ScalarKernel

LEAVES = [
    ("openmanipulator_x", "world", "gripper_link_sub"),  # a mimic prismatic follower
    ("panda", "panda_link0", "panda_rightfinger"),
    ("widowx_250s", "base_link", "gripper_prop_link"),  # continuous joint
    ("widowx_250s", "base_link", "right_finger_link"),
    ("ur5", "base_link", "tool0"),
    ("koch_v1_1", "base_link", "moving_jaw_link"),
    ("bimanual", "world", "right_tool"),
    ("hexapod", "base_link", "leg3_foot"),
]


@pytest.mark.parametrize("case", LEAVES, ids=[f"{r}:{t}" for r, _, t in LEAVES])
def test_kernel_matches_chain(case, rng, load):
    name, source, target = case
    chain = load(name).path_between(source, target)
    kernel = ScalarKernel(chain)
    assert kernel.supported
    qs = rng.uniform(-2.5, 2.5, size=(40, chain.dof))
    poses, jacobians = chain.fk_jacobian_batch(qs)
    for q, pose, jac in zip(qs, poses, jacobians, strict=True):
        flat, columns = kernel.fk_jacobian(q.tolist())
        np.testing.assert_allclose(np.reshape(flat, (3, 4)), pose[:3], atol=1e-12)
        np.testing.assert_allclose(np.array(columns).T, jac, atol=1e-12)
        np.testing.assert_allclose(np.reshape(kernel.fk(q.tolist()), (3, 4)), pose[:3], atol=1e-12)


def test_kernel_refuses_floating_chains(load):
    chain = load("hexapod").path_between("world", "leg1_foot")
    assert not ScalarKernel(chain).supported


@pytest.mark.parametrize(("m", "n"), [(6, 6), (6, 7), (6, 9), (3, 6), (6, 4), (3, 2), (6, 1)])
@pytest.mark.parametrize("preferred", [True, False])
def test_dls_step_matches_numpy(m, n, preferred, rng):
    jac = rng.normal(size=(m, n))
    e = rng.normal(size=m)
    z = rng.normal(size=n) if preferred else np.zeros(n)
    lam2, w = 1e-3, 0.3
    weights = np.where(np.arange(m) >= 3, w, 1.0)
    jw, ew = jac * weights[:, None], e * weights
    expected = z + np.linalg.solve(jw.T @ jw + lam2 * np.eye(n), jw.T @ (ew - jw @ z))
    step = dls_step(m, n, preferred=preferred)
    got = step(jac.T.tolist(), e.tolist(), lam2, w, z.tolist())
    np.testing.assert_allclose(got, expected, atol=1e-10)


def test_dls_step_reports_a_singular_system():
    step = dls_step(3, 3, preferred=False)
    with pytest.raises(ArithmeticError):
        step([[0.0, 0.0, 0.0]] * 3, [1.0, 0.0, 0.0], 0.0, 1.0, [0.0] * 3)
