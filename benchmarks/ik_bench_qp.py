"""Time QPSolver and MultiTaskSolver per call in the tracking regime, beside DLSSolver.

Cases (as in ik_bench.py): the 6-DoF UR5, the 7-DoF Panda and the 6-DoF WidowX-250s
(a Dynamixel arm), seeded. Tracking regime: the seed is the true configuration plus up
to 0.05 rad per joint, the target its full pose. Success: position error < 1e-4 m and
orientation error < 1e-3 rad with the limits respected. A jump is a solution more than
0.25 rad (any joint) from its seed. DLSSolver runs in the same loop, interleaved, as the
in-run reference: load from other processes hits both alike, so compare ratios, not
absolute times.
A last row times ``MultiTaskSolver.solve_tasks`` with both arms of the bimanual rig in
one call.

Two hooks for ``ik_bench.py``: ``tracking_solvers(arm)`` returns these solvers as its
``Solve`` callables (``(seed, target 4x4) -> q or None``), ready to be added to its
``run_regime`` table; ``qp_rows(cases)`` computes this file's own rows. ``main()``
writes the section "ik-qp" of BENCHMARKS.md. Solvers stop at 0.9 x the success
thresholds, as in ``ik_bench.py``; CPU time is the calling thread's (it leaves out the
time the scheduler took the process off the CPU).

Usage: python benchmarks/ik_bench_qp.py [--cases N] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import load_note, write_section

from hilbot.kinematics import load_urdf
from hilbot.kinematics.ik import DLSSolver, MultiStartSolver, MultiTaskSolver, QPSolver
from hilbot.kinematics.ik.core.errors import IKError
from hilbot.kinematics.ik.core.residual import rotation_error
from hilbot.kinematics.ik.multitask.model import TreeContext, TreeModel
from hilbot.kinematics.ik.multitask.tasks import FrameTask

ROBOTS = Path(__file__).resolve().parent.parent / "configs" / "robots"
ARMS = [
    ("UR5 (6-DoF)", "ur5.urdf", "base_link", "tool0"),
    ("Panda (7-DoF)", "panda.urdf", "panda_link0", "panda_hand_tcp"),
    ("WidowX-250s (6-DoF Dynamixel)", "widowx_250s.urdf", "base_link", "ee_gripper_link"),
]
POSITION_OK = 1e-4  # [m]
ORIENTATION_OK = 1e-3  # [rad]
STOP_POSITION, STOP_ORIENTATION = 0.9 * POSITION_OK, 0.9 * ORIENTATION_OK
JUMP = 0.25  # [rad]


@dataclass
class Case:
    """One tracking case: a chain, a seed and the target pose."""

    name: str
    robot: object
    source: str
    tip: str
    chain: object
    seed: np.ndarray
    target: np.ndarray


def tracking_cases(n: int, seed: int = 0) -> list[Case]:
    """``n`` tracking cases per arm (seed = truth + up to 0.05 rad per joint)."""
    rng = np.random.default_rng(seed)
    cases = []
    for name, urdf, source, tip in ARMS:
        robot = load_urdf(ROBOTS / urdf)
        chain = robot.path_between(source, tip)
        lo = np.maximum(chain.lower, -np.pi)
        hi = np.minimum(chain.upper, np.pi)
        for _ in range(n):
            q_true = rng.uniform(lo, hi)
            start = np.clip(q_true + rng.uniform(-0.05, 0.05, chain.dof), chain.lower, chain.upper)
            cases.append(Case(name, robot, source, tip, chain, start, chain.fk(q_true)))
    return cases


def _check(case: Case, q: np.ndarray) -> tuple[bool, bool]:
    """(success, jump) for a returned configuration."""
    pose = case.chain.fk(q)
    position = float(np.linalg.norm(pose[:3, 3] - case.target[:3, 3]))
    angle = rotation_error(case.target[:3, :3], pose)[1]
    inside = bool(np.all(q >= case.chain.lower) and np.all(q <= case.chain.upper))
    ok = position < POSITION_OK and angle < ORIENTATION_OK and inside
    return ok, bool(np.max(np.abs(q - case.seed)) > JUMP)


def _call(solver: object, case: Case) -> np.ndarray:
    try:
        return solver.solve(  # type: ignore[attr-defined, no-any-return]
            case.robot,
            case.seed,
            case.source,
            case.tip,
            case.target,
            max_iterations=20,
            tolerance=STOP_POSITION,
            orientation_tolerance=STOP_ORIENTATION,
        ).q
    except IKError as error:
        return case.chain.q_from(error.positions)


def tracking_solvers(
    arm: object,
) -> dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray | None]]:
    """QPSolver and MultiTaskSolver as ``ik_bench.py`` ``Solve`` callables for ``arm``.

    ``arm`` needs ``robot``, ``source`` and ``tip`` attributes (``ik_bench.Arm`` has them).
    """
    out = {}
    for name, solver in (
        ("hilbot QPSolver", QPSolver()),
        ("hilbot MultiTaskSolver", MultiTaskSolver()),
    ):

        def run(seed: np.ndarray, target: np.ndarray, solver: object = solver) -> np.ndarray | None:
            try:
                return solver.solve(  # type: ignore[attr-defined, no-any-return]
                    arm.robot,  # type: ignore[attr-defined]
                    seed,
                    arm.source,  # type: ignore[attr-defined]
                    arm.tip,  # type: ignore[attr-defined]
                    target,
                    max_iterations=20,
                    tolerance=STOP_POSITION,
                    orientation_tolerance=STOP_ORIENTATION,
                ).q
            except IKError:
                return None

        out[name] = run
    return out


def qp_rows(
    cases: Sequence[Case], solvers: dict[str, Callable[[], object]] | None = None
) -> list[tuple[str, str, float, float, float, float, float]]:
    """Rows ``(arm, solver, success %, median µs, p95 µs, median CPU µs, jumps %)``.

    The solvers run interleaved, case by case, so load hits them alike.
    """
    makers = solvers or {
        "QPSolver": QPSolver,
        "MultiTaskSolver": MultiTaskSolver,
        "DLSSolver (reference)": DLSSolver,
    }
    built = {name: make() for name, make in makers.items()}
    stats: dict[tuple[str, str], list[tuple[float, float, bool, bool]]] = {}
    for case in cases:  # warm-up: chain caches, kernels
        for solver in built.values():
            _call(solver, case)
        break
    for case in cases:
        for name, solver in built.items():
            t0, c0 = time.perf_counter(), time.thread_time()
            q = _call(solver, case)
            elapsed, cpu = time.perf_counter() - t0, time.thread_time() - c0
            ok, jump = _check(case, q)
            stats.setdefault((case.name, name), []).append((elapsed, cpu, ok, jump))
    rows = []
    for (arm, name), values in stats.items():
        times = np.array([v[0] for v in values]) * 1e6
        cpu = np.array([v[1] for v in values]) * 1e6
        rows.append(
            (
                arm,
                name,
                100.0 * float(np.mean([v[2] for v in values])),
                float(np.median(times)),
                float(np.percentile(times, 95)),
                float(np.median(cpu)),
                100.0 * float(np.mean([v[3] for v in values])),
            )
        )
    return rows


def cold_rows(n: int, seed: int = 2) -> list[tuple[str, str, float, float, float]]:
    """Cold starts (random seed within limits) with restarts: ``MultiStartSolver`` around
    QPSolver and, as the reference, DLSSolver. Rows ``(arm, solver, success %, median µs,
    median CPU µs)``."""
    rng = np.random.default_rng(seed)
    makers = {
        "MultiStartSolver(QPSolver)": lambda: MultiStartSolver(QPSolver(), restarts=60, seed=1),
        "MultiStartSolver(DLSSolver) (reference)": lambda: MultiStartSolver(
            DLSSolver(), restarts=60, seed=1
        ),
    }
    rows = []
    for name, urdf, source, tip in ARMS:
        robot = load_urdf(ROBOTS / urdf)
        chain = robot.path_between(source, tip)
        lo = np.maximum(chain.lower, -np.pi)
        hi = np.minimum(chain.upper, np.pi)
        solvers = {label: make() for label, make in makers.items()}
        stats: dict[str, list[tuple[float, float, bool]]] = {label: [] for label in solvers}
        for _ in range(n):
            q_true = rng.uniform(lo, hi)
            case = Case(name, robot, source, tip, chain, rng.uniform(lo, hi), chain.fk(q_true))
            for label, solver in solvers.items():
                t0, c0 = time.perf_counter(), time.thread_time()
                try:
                    q = solver.solve(
                        robot,
                        case.seed,
                        source,
                        tip,
                        case.target,
                        max_iterations=30,
                        tolerance=STOP_POSITION,
                        orientation_tolerance=STOP_ORIENTATION,
                    ).q
                except IKError as error:
                    q = chain.q_from(error.positions)
                elapsed, cpu = time.perf_counter() - t0, time.thread_time() - c0
                stats[label].append((elapsed, cpu, _check(case, q)[0]))
        for label, values in stats.items():
            rows.append(
                (
                    name,
                    label,
                    100.0 * float(np.mean([v[2] for v in values])),
                    float(np.median([v[0] for v in values])) * 1e6,
                    float(np.median([v[1] for v in values])) * 1e6,
                )
            )
    return rows


def bimanual_row(n: int, seed: int = 1) -> tuple[float, float, float]:
    """Both arms of the bimanual rig in one ``solve_tasks`` call: (success %, median, p95 µs)."""
    robot = load_urdf(ROBOTS / "bimanual.urdf")
    model = TreeModel(robot, "torso")
    solver = MultiTaskSolver()
    rng = np.random.default_rng(seed)
    times, oks = [], []
    for _ in range(n):
        q_true = rng.uniform(np.maximum(model.lower, -2.0), np.minimum(model.upper, 2.0))
        start = np.clip(q_true + rng.uniform(-0.05, 0.05, model.nv), model.lower, model.upper)
        ctx = TreeContext(model, q_true)
        tasks = [FrameTask(tip, ctx.pose(tip)) for tip in ("left_tool", "right_tool")]
        t0 = time.perf_counter()
        solution = solver.solve_tasks(
            robot, start, tasks, root_link="torso", orientation_tolerance=ORIENTATION_OK
        )
        times.append(time.perf_counter() - t0)
        oks.append(solution.reached)
    t = np.array(times) * 1e6
    return 100.0 * float(np.mean(oks)), float(np.median(t)), float(np.percentile(t, 95))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300, help="cases per arm")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = qp_rows(tracking_cases(args.cases))
    reference = {arm: cpu for arm, name, _, _, _, cpu, _ in rows if name.startswith("DLS")}
    intro = (
        "Tracking regime (seed = truth + up to 0.05 rad per joint, full-pose targets), "
        f"{args.cases} seeded cases per arm; success = position < 1e-4 m and orientation "
        "< 1e-3 rad within limits; jumps = solutions > 0.25 rad from the seed. The solvers "
        "run interleaved in one loop; the peer is DLSSolver (same run, thread CPU time). "
    )
    lines = [
        "",
        "| arm | solver | success % | median µs | p95 µs | median CPU µs | × DLS CPU | jumps % |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, name, success, med, p95, cpu, jumps in rows:
        ratio = cpu / reference[arm] if arm in reference else float("nan")
        cells = [arm, name, f"{success:.1f}", f"{med:.0f}", f"{p95:.0f}", f"{cpu:.0f}"]
        lines.append("| " + " | ".join([*cells, f"{ratio:.1f}", f"{jumps:.1f}"]) + " |")
    success, med, p95 = bimanual_row(max(50, args.cases // 3))
    lines += [
        "",
        "Bimanual rig, both arms' full poses in one `MultiTaskSolver.solve_tasks` call "
        f"(12 joints, tracking seeds): success {success:.1f} %, median {med:.0f} µs, "
        f"p95 {p95:.0f} µs.",
    ]
    cold = max(30, args.cases // 3)
    lines += [
        "",
        f"Cold start (random seed within the limits, up to 60 restarts), {cold} cases per arm:",
        "",
        "| arm | solver | success % | median µs | median CPU µs |",
        "|---|---|---:|---:|---:|",
    ]
    for arm, name, success, med, cpu in cold_rows(cold):
        lines.append(f"| {arm} | {name} | {success:.1f} | {med:.0f} | {cpu:.0f} |")
    body = "\n".join([intro + load_note(load, os.getloadavg()[0]), *lines])
    if args.no_write:
        print(body)
    else:
        write_section("ik-qp", "IK: QPSolver and MultiTaskSolver (tracking, cold start)", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
