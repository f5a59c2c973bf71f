"""The fused DLS iteration gives the same floats as the general path it shortcuts."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics.ik import DLSSolver
from hilbot.kinematics.ik.core.solver import _options
from hilbot.kinematics.ik.core.target import Target, parse_target
from hilbot.kinematics.ik.dls.dls_solver import _Run

CHAINS = [
    ("ur5", "base_link", "tool0"),
    ("panda", "panda_link0", "panda_hand_tcp"),  # 7 columns: the 6x6 system on J Jᵀ
    ("widowx_250s", "base_link", "ee_gripper_link"),
    ("openmanipulator_x", "world", "end_effector_link"),  # 4 columns: Jᵀ J for a pose
    ("koch_v1_1", "base_link", "tool"),
]


@pytest.mark.parametrize("case", CHAINS, ids=[f"{r}:{t}" for r, _, t in CHAINS])
@pytest.mark.parametrize("rows", [3, 6])
@pytest.mark.parametrize("max_delta", [None, 0.05])
def test_fused_equals_general(case, rows, max_delta, load, sample, rng):
    """Tracking and cold seeds, limits and max_delta boxes, stall rules: same result."""
    name, source, target = case
    chain = load(name).path_between(source, target)
    solver = DLSSolver()
    ctx = solver.context(chain)
    info = solver.info(chain)
    fused_runs = 0
    for k in range(40):
        q_true = sample(chain, rng)
        pose = chain.fk(q_true)
        task = parse_target(pose) if rows == 6 else Target(tuple(pose[:3, 3].tolist()))
        if k % 2:
            seed = sample(chain, rng)  # cold: the box binds, steps get rejected
        else:
            seed = np.clip(q_true + rng.uniform(-0.05, 0.05, chain.dof), chain.lower, chain.upper)
        stall = (2, 0.1) if k % 4 == 1 else None
        options = _options(30, 1e-5, 1e-4, False, True, max_delta)._replace(stall=stall)
        box = info.box(seed, True, max_delta)
        run = _Run(solver, ctx, box, options)
        fused = run.fused(task)
        assert fused is not None
        fused_runs += 1
        q1, it1, ev1, status1 = run.fast(fused, seed.tolist(), task, 30)
        q2, it2, ev2, status2 = run.general(seed.tolist(), task, 30, 0, 1.0, 0, None)
        assert (q1, it1, status1) == (q2, it2, status2)
        assert (ev1.position, ev1.orientation) == (ev2.position, ev2.orientation)
    assert fused_runs == 40


def test_fused_does_not_apply_to_rest_svd_or_axis(load):
    chain = load("ur5").path_between("base_link", "tool0")
    task = Target((0.3, 0.1, 0.4))
    options = _options(30, 1e-5, 1e-4, False, True, None)
    for solver in (DLSSolver(svd=True), DLSSolver(rest={"shoulder_lift_joint": 0.0})):
        run = _Run(
            solver, solver.context(chain), solver.info(chain).box(np.zeros(6), True, None), options
        )
        assert run.fused(task) is None
    solver = DLSSolver()
    run = _Run(
        solver, solver.context(chain), solver.info(chain).box(np.zeros(6), True, None), options
    )
    assert run.fused(parse_target(((0.3, 0.1, 0.4), (0.0, 0.0, 1.0)))) is None
    assert run.fused(task) is not None
