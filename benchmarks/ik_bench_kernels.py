"""What the generated kernels buy: the same work with and without them, in the same run.

Rows, per arm (UR5, Panda), each the median over interleaved repeats of the CPU time
per call:

- FK + Jacobian of one configuration: ``Chain.fk_jacobian`` (generated straight-line
  Python, ``codegen.chain_kernels``), the IK solvers' ``ScalarKernel`` on Python floats
  (``codegen.scalar_kernel``), and the plain numpy path the same compiled chain takes
  without generated code (``Chain.fk_jacobian_batch`` on one row: ``codegen.program``);
- one DLS tracking solve (seed 0.05 rad per joint off, full pose): the default (one
  generated function per iteration, ``codegen.fused_step``), the general loop on the
  generated FK + Jacobian (fused iteration off), and the general loop on the plain
  numpy FK + Jacobian (no generated FK code at all);
- a batch of 1000 tracking solves: ``BatchKernel`` (``codegen.batch_kernel``) against
  ``Chain.fk_jacobian_batch``.

The "off" variants are made by switching the generated parts off in this process only.

Usage: python benchmarks/ik_bench_kernels.py [--repeats N]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hilbot.kinematics import load_urdf
from hilbot.kinematics.codegen import ScalarKernel
from hilbot.kinematics.ik import BatchSolver, DLSSolver
from hilbot.kinematics.ik.core.context import Context
from hilbot.kinematics.ik.dls import dls_solver

ROBOTS = Path(__file__).resolve().parent.parent / "configs" / "robots"
ARMS = [
    ("UR5", "ur5", "base_link", "tool0"),
    ("Panda", "panda", "panda_link0", "panda_hand_tcp"),
]


def _per_call(call: Callable[[], object], calls: int) -> float:
    t0 = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - t0) / calls * 1e6


def _numpy_fk(ctx: Context) -> None:
    """Point ``ctx`` at the plain numpy FK + Jacobian of its chain (no generated code)."""
    chain = ctx.chain

    def fk_jacobian(q: list[float]) -> tuple[list[float], list[list[float]]]:
        pose, jac = chain.fk_jacobian_batch(np.array([q]))
        return pose[0, :3].reshape(12).tolist(), jac[0].T.tolist()

    def fk(q: list[float]) -> list[float]:
        return list(chain.fk_batch(np.array([q]))[0, :3].reshape(12).tolist())

    ctx.fk_jacobian, ctx.fk, ctx.kernel = fk_jacobian, fk, None


def _tracking(solver: DLSSolver, robot: Any, source: str, tip: str, cases: list) -> None:
    for seed, target in cases:
        with contextlib.suppress(Exception):  # timing only; the same cases for every row
            solver.solve(robot, seed, source, tip, target)


def _rows(name: str, source: str, tip: str, rng: np.random.Generator) -> dict[str, Callable]:
    robot = load_urdf(ROBOTS / f"{name}.urdf")
    chain = robot.path_between(source, tip)
    lo, hi = chain.lower, chain.upper
    q = rng.uniform(lo, hi)
    q_list = q.tolist()
    kernel = ScalarKernel(chain)
    truth = [rng.uniform(lo + 0.2, hi - 0.2) for _ in range(40)]
    cases = [(np.clip(t + rng.uniform(-0.05, 0.05, chain.dof), lo, hi), chain.fk(t)) for t in truth]
    fused = DLSSolver()
    general = DLSSolver()
    general.context(chain)  # built now; ``fused`` is switched off for it below
    plain = DLSSolver()
    _numpy_fk(plain.context(chain))
    seeds = np.array([s for s, _ in cases] * 25)
    targets = np.array([t for _, t in cases] * 25)
    batch, batch_numpy = BatchSolver(), BatchSolver()
    batch.solve_batch(robot, seeds[:2], source, tip, targets[:2])
    batch_numpy.solve_batch(robot, seeds[:2], source, tip, targets[:2])
    ctx = batch_numpy._contexts[id(chain)]
    batch_numpy._kernels[id(chain)] = (ctx, None)  # BatchRun falls back to numpy FK
    original = dls_solver._Run.fused

    def without_fused(call: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            dls_solver._Run.fused = lambda self, task: None  # type: ignore[method-assign]
            try:
                call()
            finally:
                dls_solver._Run.fused = original  # type: ignore[method-assign]

        return run

    def track(solver: DLSSolver) -> Callable[[], None]:
        return lambda: _tracking(solver, robot, source, tip, cases)

    def solve_batch(solver: BatchSolver) -> Callable[[], object]:
        return lambda: solver.solve_batch(robot, seeds, source, tip, targets, as_arrays=True)

    n, b = len(cases), len(seeds)
    return {
        "FK+J, generated (Chain.fk_jacobian)": (lambda: chain.fk_jacobian(q), 2000, 1),
        "FK+J, generated on floats (ScalarKernel)": (lambda: kernel.fk_jacobian(q_list), 2000, 1),
        "FK+J, plain numpy (fk_jacobian_batch, B=1)": (
            lambda: chain.fk_jacobian_batch(q[None]),
            500,
            1,
        ),
        "DLS solve, fused iteration (default)": (track(fused), 5, n),
        "DLS solve, general loop on ScalarKernel": (without_fused(track(general)), 5, n),
        "DLS solve, general loop on plain numpy FK+J": (without_fused(track(plain)), 2, n),
        "batch of 1000, BatchKernel [per item]": (solve_batch(batch), 1, b),
        "batch of 1000, numpy FK+J [per item]": (solve_batch(batch_numpy), 1, b),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    rng = np.random.default_rng(11)
    for label, name, source, tip in ARMS:
        rows = _rows(name, source, tip, rng)
        times: dict[str, list[float]] = {key: [] for key in rows}
        for _ in range(args.repeats):  # interleaved: every row once per repeat
            for key, (call, calls, per) in rows.items():
                times[key].append(_per_call(call, calls) / per)
        print(f"\n{label}\n\n| row | µs |\n|---|---:|")
        for key, values in times.items():
            print(f"| {key} | {statistics.median(values):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
