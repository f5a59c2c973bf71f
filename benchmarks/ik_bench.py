"""IK speed and success: hilbot's DLS, multi-start and batched solvers against peer libraries.

Cases (seeded): a 6-DoF UR5, a 7-DoF Panda and a 6-DoF WidowX-250s (a Dynamixel arm).
Targets are full poses, FK of random configurations within the limits. Success means
a position error < 1e-4 m and an orientation error < 1e-3 rad, with every joint
within its limits, checked with hilbot's FK on the returned configuration.

Regimes:
- tracking: the seed is the true configuration plus up to 0.05 rad per joint (what a
  teleop driver sees every cycle); no restarts;
- cold start: the seed is a random configuration within the limits; restarts allowed.

Reported per solver: success %, median and p95 µs per call, wall clock and CPU time of
the calling thread (the CPU time leaves out the time the scheduler took the process
off the CPU, which dominates the wall-clock p95 on a busy machine), and the share of
solutions more than 0.25 rad (any joint) from the seed (a branch jump when tracking).
Every case runs all solvers back to back (interleaved), so load from other processes
hits them alike: compare ratios.

Peers (the ``bench`` extra; a missing one is reported and skipped): ikpy,
roboticstoolbox-python's ``ik_LM`` on the chain's ETS, TRAC-IK through the
``pytracik`` wheel (Speed mode), and a pinocchio CLIK loop written here (damped
least squares on ``log6``, as in pinocchio's own example, with restarts for cold
starts).

Usage: python benchmarks/ik_bench.py [--cases N] [--batch B] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import load_note, write_section

from hilbot.kinematics import Chain, Robot, load_urdf
from hilbot.kinematics.ik import BatchSolver, DLSSolver, IKError, MultiStartSolver
from hilbot.kinematics.ik.core.residual import rotation_error

ROBOTS = Path(__file__).resolve().parent.parent / "configs" / "robots"
ARMS = [
    ("UR5 (6-DoF)", "ur5", "base_link", "tool0"),
    ("Panda (7-DoF)", "panda", "panda_link0", "panda_hand_tcp"),
    ("WidowX-250s (6-DoF, Dynamixel)", "widowx_250s", "base_link", "ee_gripper_link"),
]
POS_TOL, ORI_TOL, JUMP = 1e-4, 1e-3, 0.25
# Solvers stop a little inside the success thresholds.
STOP_POS, STOP_ORI = 0.9 * POS_TOL, 0.9 * ORI_TOL

Solve = Callable[[np.ndarray, np.ndarray], np.ndarray | None]  # (seed, target 4x4) -> q


@dataclass
class Arm:
    label: str
    name: str
    source: str
    tip: str
    robot: Robot
    chain: Chain
    urdf: Path
    lower: np.ndarray = field(init=False)
    upper: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.lower = np.where(np.isfinite(self.chain.lower), self.chain.lower, -np.pi)
        self.upper = np.where(np.isfinite(self.chain.upper), self.chain.upper, np.pi)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.lower, self.upper)

    def names(self) -> list[str]:
        return [n for n, _ in self.chain.jacobian_columns]


@dataclass
class Tally:
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    ok: int = 0
    jumps: int = 0
    n: int = 0
    note: str = ""

    def add(self, arm: Arm, seed: np.ndarray, target: np.ndarray, q, seconds, cpu) -> None:
        self.n += 1
        self.times.append(seconds)
        self.cpu.append(cpu)
        if q is None:
            return
        q = np.asarray(q, dtype=float)
        pose = arm.chain.fk(q)
        position = float(np.linalg.norm(pose[:3, 3] - target[:3, 3]))
        angle = rotation_error(target[:3, :3], pose)[1]
        inside = bool(np.all(q >= arm.chain.lower - 1e-9) and np.all(q <= arm.chain.upper + 1e-9))
        self.ok += position < POS_TOL and angle < ORI_TOL and inside
        self.jumps += float(np.max(np.abs(q - seed))) > JUMP

    def row(self, name: str) -> str:
        if not self.n:
            return f"| {name} | – | – | – | – | – | – | {self.note} |"
        us = np.array(self.times) * 1e6
        cpu = np.array(self.cpu) * 1e6
        return (
            f"| {name} | {100.0 * self.ok / self.n:.1f} % | {statistics.median(us):,.0f} | "
            f"{np.percentile(us, 95):,.0f} | {statistics.median(cpu):,.0f} | "
            f"{np.percentile(cpu, 95):,.0f} | {100.0 * self.jumps / self.n:.1f} % | "
            f"{self.n}{'; ' + self.note if self.note else ''} |"
        )


# --- hilbot -------------------------------------------------------------------------------


def hilbot_tracking(arm: Arm) -> Solve:
    solver = DLSSolver()

    def run(seed: np.ndarray, target: np.ndarray) -> np.ndarray | None:
        try:
            sol = solver.solve(
                arm.robot,
                seed,
                arm.source,
                arm.tip,
                target,
                max_iterations=20,
                tolerance=STOP_POS,
                orientation_tolerance=STOP_ORI,
            )
        except IKError:
            return None
        return sol.q

    return run


def hilbot_cold(arm: Arm) -> Solve:
    solver = MultiStartSolver(DLSSolver(), restarts=80, seed=1, attempt_iterations=25)

    def run(seed: np.ndarray, target: np.ndarray) -> np.ndarray | None:
        try:
            sol = solver.solve(
                arm.robot,
                seed,
                arm.source,
                arm.tip,
                target,
                max_iterations=30,
                tolerance=STOP_POS,
                orientation_tolerance=STOP_ORI,
            )
        except IKError:
            return None
        return sol.q if sol.reached else None

    return run


# --- peers --------------------------------------------------------------------------------


def rtb_solver(arm: Arm, cold: bool) -> Solve:
    import roboticstoolbox as rtb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot = rtb.Robot.URDF(str(arm.urdf))
    ets = robot.ets(start=arm.source, end=arm.tip)
    if ets.n != arm.chain.dof:
        raise RuntimeError(f"rtb chain has {ets.n} joints, hilbot {arm.chain.dof}")
    slimit = 100 if cold else 1

    def run(seed: np.ndarray, target: np.ndarray) -> np.ndarray | None:
        sol = ets.ik_LM(target, q0=seed, ilimit=30, slimit=slimit, tol=1e-10, joint_limits=True)
        return np.asarray(sol.q) if sol.success else None

    return run


def trac_ik_solver(arm: Arm, cold: bool) -> Solve:
    import pytracik

    # TRAC-IK's timeout is wall clock and it runs two threads: on a busy 2-core
    # machine 2-5 ms timeouts starve it (about 40 % success), so it gets generous ones.
    timeout = 0.05 if cold else 0.02
    solver = pytracik.TRAC_IK(
        arm.source, arm.tip, arm.urdf.read_text(), timeout, 1e-5, pytracik.SolveType.Speed
    )
    if pytracik.get_num_joints(solver) != arm.chain.dof:
        raise RuntimeError("TRAC-IK chain length differs")

    def run(seed: np.ndarray, target: np.ndarray) -> np.ndarray | None:
        w, x, y, z = _quaternion(target[:3, :3])
        p = target[:3, 3]
        out = pytracik.ik(solver, seed, p[0], p[1], p[2], x, y, z, w)
        return np.asarray(out[1:]) if out[0] >= 0 else None

    return run


def ikpy_solver(arm: Arm, cold: bool) -> Solve:
    import ikpy.chain

    elements = [arm.source]
    for joint in arm.chain.path:
        elements += [joint.name, joint.child]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chain = ikpy.chain.Chain.from_urdf_file(str(arm.urdf), base_elements=elements)
        mask = [link.joint_type != "fixed" for link in chain.links]
        chain = ikpy.chain.Chain.from_urdf_file(
            str(arm.urdf), base_elements=elements, active_links_mask=mask
        )
    active = np.flatnonzero(mask)
    if len(active) != arm.chain.dof:
        raise RuntimeError("ikpy chain length differs")
    rng = np.random.default_rng(2)

    def once(seed: np.ndarray, target: np.ndarray) -> np.ndarray:
        full = np.zeros(len(chain.links))
        full[active] = seed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = chain.inverse_kinematics(
                target[:3, 3], target[:3, :3], orientation_mode="all", initial_position=full
            )
        return np.asarray(out)[active]

    def run(seed: np.ndarray, target: np.ndarray) -> np.ndarray | None:
        q = once(seed, target)
        for _ in range(10 if cold else 0):  # a few restarts for cold starts
            if _success(arm, q, target):
                break
            q = once(arm.sample(rng), target)
        return q

    return run


def pinocchio_solver(arm: Arm, cold: bool) -> Solve:
    """Damped least squares on log6 in Python on pinocchio's FK/Jacobian (its own example)."""
    import pinocchio as pin

    full = pin.buildModelFromUrdf(str(arm.urdf))
    keep = set(arm.names())
    lock = [i for i, n in enumerate(full.names) if i > 0 and n not in keep]
    model = pin.buildReducedModel(full, lock, pin.neutral(full))
    data = model.createData()
    frame = model.getFrameId(arm.tip)
    order = [model.getJointId(n) for n in arm.names()]
    idx = np.array([model.joints[j].idx_q for j in order])
    if model.nq != arm.chain.dof:
        raise RuntimeError("pinocchio model has extra coordinates")
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    rng = np.random.default_rng(3)

    def clik(q: np.ndarray, goal: pin.SE3, iterations: int) -> tuple[np.ndarray, bool]:
        for _ in range(iterations):
            pin.forwardKinematics(model, data, q)
            pin.updateFramePlacement(model, data, frame)
            current = data.oMf[frame]
            err_world = goal.translation - current.translation
            diff = current.actInv(goal)
            err = pin.log(diff).vector
            if np.linalg.norm(err_world) < STOP_POS and np.linalg.norm(err[3:]) < STOP_ORI:
                return q, True
            jac = pin.computeFrameJacobian(model, data, q, frame)  # local frame
            jac = pin.Jlog6(diff.inverse()) @ jac
            v = jac.T @ np.linalg.solve(jac @ jac.T + 1e-10 * np.eye(6), err)
            q = np.clip(pin.integrate(model, q, v), lo, hi)
        return q, False

    def run(seed: np.ndarray, target: np.ndarray) -> np.ndarray | None:
        goal = pin.SE3(target[:3, :3].copy(), target[:3, 3].copy())
        q = np.empty(model.nq)
        q[idx] = seed
        q, ok = clik(q, goal, 30)
        for _ in range(60 if cold else 0):
            if ok:
                break
            start = np.empty(model.nq)
            start[idx] = arm.sample(rng)
            q, ok = clik(start, goal, 30)
        return q[idx] if ok else None

    return run


def _success(arm: Arm, q: np.ndarray, target: np.ndarray) -> bool:
    pose = arm.chain.fk(q)
    return bool(
        np.linalg.norm(pose[:3, 3] - target[:3, 3]) < POS_TOL
        and rotation_error(target[:3, :3], pose)[1] < ORI_TOL
    )


def _quaternion(r: np.ndarray) -> tuple[float, float, float, float]:
    from hilbot.kinematics.spatial import matrix_to_quat

    w, x, y, z = matrix_to_quat(r)
    return float(w), float(x), float(y), float(z)


# --- runs ---------------------------------------------------------------------------------

PEERS: dict[str, Callable[[Arm, bool], Solve]] = {
    "rtb ik_LM (C++)": rtb_solver,
    "TRAC-IK (pytracik, C++)": trac_ik_solver,
    "pinocchio CLIK (Python loop)": pinocchio_solver,
    "ikpy": ikpy_solver,
}
SLOW = {"ikpy"}  # run on fewer cases


def run_regime(arm: Arm, cold: bool, cases: int, rng: np.random.Generator) -> dict[str, Tally]:
    solvers: dict[str, Solve] = {}
    tallies: dict[str, Tally] = {}
    mine = "hilbot MultiStartSolver(DLS)" if cold else "hilbot DLSSolver"
    solvers[mine] = hilbot_cold(arm) if cold else hilbot_tracking(arm)
    tallies[mine] = Tally()
    for peer, make in PEERS.items():
        tallies[peer] = Tally()
        try:
            solvers[peer] = make(arm, cold)
        except Exception as exc:  # a peer that cannot install or load is reported
            tallies[peer].note = f"not run: {type(exc).__name__}: {exc}"[:120]
    slow_every = max(1, cases // 40)
    for k in range(cases):
        q_true = arm.sample(rng)
        target = arm.chain.fk(q_true)
        if cold:
            seed = arm.sample(rng)
        else:
            seed = np.clip(q_true + rng.uniform(-0.05, 0.05, arm.chain.dof), arm.lower, arm.upper)
        for name, solve in solvers.items():
            if name in SLOW and k % slow_every:
                continue
            try:
                start, start_cpu = time.perf_counter(), time.thread_time()
                q = solve(seed, target)
                seconds = time.perf_counter() - start
                cpu = time.thread_time() - start_cpu
            except Exception as exc:
                tallies[name].note = f"error: {type(exc).__name__}: {exc}"[:120]
                del solvers[name]
                break
            tallies[name].add(arm, seed, target, q, seconds, cpu)
    return tallies


def run_batches(arms: list[Arm], batch: int, rounds: int = 25) -> list[str]:
    """Batched tracking throughput per arm: ``rounds`` rounds, each solving one batch per arm
    in turn (interleaved, so a burst of load from other processes hits every arm alike), and
    the median time per arm."""
    solver = BatchSolver()
    cases = []
    for arm in arms:
        rng = np.random.default_rng(11)
        q_true = rng.uniform(arm.lower, arm.upper, (batch, arm.chain.dof))
        seeds = np.clip(q_true + rng.uniform(-0.05, 0.05, q_true.shape), arm.lower, arm.upper)
        cases.append((arm, seeds, arm.chain.fk_batch(q_true)))
    times: dict[str, list[float]] = {arm.label: [] for arm in arms}
    cpu: dict[str, list[float]] = {arm.label: [] for arm in arms}
    ok: dict[str, float] = {}
    for _ in range(rounds):
        for arm, seeds, targets in cases:
            start, start_cpu = time.perf_counter(), time.thread_time()
            out = solver.solve_batch(
                arm.robot,
                seeds,
                arm.source,
                arm.tip,
                targets,
                max_iterations=20,
                tolerance=STOP_POS,
                orientation_tolerance=STOP_ORI,
                as_arrays=True,
            )
            times[arm.label].append(time.perf_counter() - start)
            cpu[arm.label].append(time.thread_time() - start_cpu)
            ok[arm.label] = float(np.mean(out.reached & (out.orientation_residual < ORI_TOL)))
    return [
        f"| {arm.label} | {batch} | {batch / statistics.median(times[arm.label]):,.0f} "
        f"| {batch / statistics.median(cpu[arm.label]):,.0f} | {100 * ok[arm.label]:.1f} % |"
        for arm in arms
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="cases per arm and regime")
    parser.add_argument("--batch", type=int, default=1000, help="batch size for throughput")
    parser.add_argument("--no-write", action="store_true", help="print, do not write BENCHMARKS.md")
    args = parser.parse_args()
    arms = [
        Arm(
            label,
            name,
            source,
            tip,
            robot,
            robot.path_between(source, tip),
            ROBOTS / f"{name}.urdf",
        )
        for label, name, source, tip in ARMS
        for robot in [load_urdf(ROBOTS / f"{name}.urdf")]
    ]
    header = (
        "| solver | success | median µs | p95 µs | median CPU µs | p95 CPU µs "
        "| > 0.25 rad from seed | cases |\n|---|---|---|---|---|---|---|---|"
    )
    sections = []
    started = time.perf_counter()
    load = os.getloadavg()[0]
    for cold, title in ((False, "Tracking (seed = truth + ≤ 0.05 rad)"), (True, "Cold start")):
        for arm in arms:
            rng = np.random.default_rng(7 + cold)
            tallies = run_regime(arm, cold, args.cases, rng)
            rows = "\n".join(t.row(name) for name, t in tallies.items())
            sections.append(f"### {title}: {arm.label}\n\n{header}\n{rows}\n")
            print(sections[-1], flush=True)
    batch_rows = "\n".join(run_batches(arms, args.batch))
    sections.append(
        "### Batched tracking (BatchSolver.solve_batch, pure numpy)\n\n"
        "Median of 25 rounds; each round solves one batch per arm, in turn.\n\n"
        "| arm | batch | solves/s (wall) | solves/s (CPU) | success |\n|---|---|---|---|---|\n"
        + batch_rows
        + "\n"
    )
    print(sections[-1])
    elapsed = time.perf_counter() - started
    body = (
        f"{__doc__.split('Usage:')[0].strip()}\n\n"
        f"Run time {elapsed:.0f} s. {load_note(load, os.getloadavg()[0])} On a busy "
        "machine absolute times move by several times from run to run (rtb's `ik_LM`, "
        "about 10 µs in the issue's anchors, takes what the table says here).\n\n"
        + "\n".join(sections)
    )
    if not args.no_write:
        write_section("ik", "IK: DLS, multi-start and batched solvers vs peers", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
