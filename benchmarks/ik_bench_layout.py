"""Same-run speed of two checkouts of hilbot's kinematics: before and after a refactor.

Each round runs one short worker process per checkout, in alternating order (the
rows are interleaved, so the load of a shared machine hits both alike), and every
worker times the same public-API workloads: FK + Jacobian per call, DLS tracking
solves (UR5, Panda), multi-start cold starts, a batched solve and QP tracking. A
workload's figure is its median over rounds of the worker's median CPU time per call.

The checkouts are import roots that hold a ``hilbot`` package: ``--old`` and ``--new``
(``new`` defaults to the installed one). Lay out an old commit with
``git worktree add <dir> <commit>`` and a ``hilbot`` folder of symlinks to its
``src/hilbot/*`` and ``kinematics``.

Usage: python benchmarks/ik_bench_layout.py --old ROOT [--new ROOT] [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROBOTS = Path(__file__).resolve().parent.parent / "configs" / "robots"


def _time(call: Callable[[], object], calls: int, blocks: int = 7) -> float:
    """Median CPU time per call [µs] over ``blocks`` blocks of ``calls`` calls."""
    out = []
    for _ in range(blocks):
        t0 = time.process_time()
        for _ in range(calls):
            call()
        out.append((time.process_time() - t0) / calls * 1e6)
    return statistics.median(out)


def _track(solver: Any, robot: Any, source: str, tip: str, seeds: list, targets: list) -> None:
    """Solve every (seed, target) pair; failures count like successes (timing only)."""
    for seed, target in zip(seeds, targets, strict=True):
        with contextlib.suppress(Exception):  # an IKError on a hard case: same for both
            solver.solve(
                robot, seed, source, tip, target, tolerance=9e-5, orientation_tolerance=9e-4
            )


def _arm(label: str, name: str, source: str, tip: str, rng: Any) -> dict[str, float]:
    """The workloads on one arm."""
    import numpy as np

    from hilbot.kinematics import load_urdf
    from hilbot.kinematics.ik import BatchSolver, DLSSolver, MultiStartSolver, QPSolver

    robot = load_urdf(ROBOTS / f"{name}.urdf")
    chain = robot.path_between(source, tip)
    lo, hi = chain.lower, chain.upper
    q = rng.uniform(lo, hi)
    cases = [rng.uniform(lo + 0.2, hi - 0.2) for _ in range(40)]
    targets = [chain.fk(c) for c in cases]
    seeds = [np.clip(c + rng.uniform(-0.05, 0.05, chain.dof), lo, hi) for c in cases]
    cold = [rng.uniform(lo, hi) for _ in range(10)]
    batch_seeds, batch_targets = np.array(seeds * 25), np.array(targets * 25)
    dls, qp, multi, batch = DLSSolver(), QPSolver(), MultiStartSolver(seed=1), BatchSolver()
    return {
        f"fk+J {label} [µs/call]": _time(functools.partial(chain.fk_jacobian, q), 2000),
        f"DLS tracking {label} [µs/solve]": _time(
            functools.partial(_track, dls, robot, source, tip, seeds, targets), 5
        )
        / len(seeds),
        f"QP tracking {label} [µs/solve]": _time(
            functools.partial(_track, qp, robot, source, tip, seeds, targets), 1, blocks=5
        )
        / len(seeds),
        f"multi-start cold {label} [µs/solve]": _time(
            functools.partial(_track, multi, robot, source, tip, cold, targets[:10]), 1, blocks=5
        )
        / len(cold),
        f"batch 1000 tracking {label} [µs/item]": _time(
            functools.partial(
                batch.solve_batch, robot, batch_seeds, source, tip, batch_targets, as_arrays=True
            ),
            1,
            blocks=5,
        )
        / len(batch_seeds),
    }


def worker() -> dict[str, float]:
    """Time every workload with the ``hilbot`` this process imports."""
    import numpy as np

    rng = np.random.default_rng(5)
    out = _arm("UR5", "ur5", "base_link", "tool0", rng)
    out.update(_arm("Panda", "panda", "panda_link0", "panda_hand_tcp", rng))
    return out


def _run(root: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if root:
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, __file__, "--worker"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="import root of the old checkout")
    parser.add_argument("--new", default=None, help="import root of the new one (installed)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker()))
        return 0
    if not args.old:
        parser.error("--old is required")
    rows: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for r in range(args.rounds):
        order = [("old", args.old), ("new", args.new)]
        for side, root in order if r % 2 == 0 else order[::-1]:
            for key, value in _run(root).items():
                rows[side].setdefault(key, []).append(value)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print("| workload | old | new | new / old |\n|---|---:|---:|---:|")
    for key in rows["old"]:
        old = statistics.median(rows["old"][key])
        new = statistics.median(rows["new"][key])
        print(f"| {key} | {old:.1f} | {new:.1f} | {new / old:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
