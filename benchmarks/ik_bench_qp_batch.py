"""Batched constrained IK: hilbot's solve_ik / QPBatchSolver against mink-warp, CPU, same run.

B worlds of one arm (Panda 7-DoF, UR5 6-DoF; and 4- to 7-DoF arms for the DoF
growth), each with its own seed (truth + up to 0.3 rad) and full-pose target, one
frame task per world, dt = 0.01 s:

- box path: joint limits (ConfigurationLimit, gain 0.95) and velocity limits (the
  URDF's); one differential step = solve + integrate (+ the forward kinematics the
  next step needs), 20 steps per sample from the same seeds;
- general path: the same limits plus one half-space row on the step,
  ``dq_2 + 0.5 dq_3 <= 0.004``;
- violations: a joint beyond its limit by more than 1e-6 rad, a step beyond
  ``v_max dt`` by more than 1e-6 rad, or the row beyond ``h`` by more than 1e-6
  (mink-warp computes in float32; the worst excess of each is quoted as well);
  blown up: a step with a coordinate over 1 rad (or not finite);
- growth with B (1 ... 10000) on the Panda, and with DoF at B = 1000;
- the first call of each (mink-warp compiles its Warp kernels into an empty cache;
  hilbot generates its kernels from the chain).

The peer is mink-warp 0.1.0 on Warp's CPU backend (one thread), from a MuJoCo model
this script writes from the same URDF chain (bodies, joints, limits; a site at the
tool frame). Its installed ConfigurationLimit and VelocityLimit test ``jnt_type in
(mjtJoint.mjJNT_HINGE, ...)``: a numpy int is never ``in`` that tuple of pybind
enums, so ConfigurationLimit silently limited no joint and VelocityLimit refused
every one. This script applies the one-line fix (the tuple as ints) to the installed
modules, in this process only.

Also measured: ``QPBatchSolver`` (the iterative solver whose worlds equal
``QPSolver``'s) against ``QPSolver`` in a loop, and the share of velocity-limited
``QPSolver`` solves that end ``stalled``; ``solve_ik`` on a multi-task set-up (a hand
and a posture task per world, weighted and prioritized); and the statuses of
velocity-limited ``MultiTaskSolver`` solves.

Rows are interleaved (peer, hilbot, peer, hilbot, ...) so that load from other processes
hits both alike, and medians are quoted: compare the ratios in one run. numpy runs with one
BLAS thread.

Usage: python benchmarks/ik_bench_qp_batch.py [--repeats N] [--no-write]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import load_note, write_section

from hilbot.kinematics import load_urdf
from hilbot.kinematics.ik import (
    Configuration,
    ConfigurationLimit,
    FrameTargets,
    LinearInequality,
    MultiTaskSolver,
    PostureTask,
    QPBatchSolver,
    QPSolver,
    Status,
    VelocityLimit,
    solve_ik,
)
from hilbot.kinematics.ik.core.errors import IKError

ROBOTS = Path(__file__).resolve().parent.parent / "configs" / "robots"
ARMS = {
    "Panda (7-DoF)": ("panda.urdf", "panda_link0", "panda_hand_tcp"),
    "UR5 (6-DoF)": ("ur5.urdf", "base_link", "tool0"),
    "Koch v1.1 (5-DoF)": ("koch_v1_1.urdf", "base_link", "tool"),
    "OpenManipulator-X (4-DoF)": ("openmanipulator_x.urdf", "world", "end_effector_link"),
}
DT = 0.01
STEPS = 20
TOL = 1e-6  # [rad] counted as a violation (mink-warp is float32); worst excess quoted too


# --- the worlds -------------------------------------------------------------------------


def worlds(chain: Any, size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeds (B, dof) near random truths, and the truths' poses (B, 4, 4)."""
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    q_true = rng.uniform(lo, hi, (size, chain.dof))
    q0 = np.clip(q_true + rng.uniform(-0.3, 0.3, q_true.shape), chain.lower, chain.upper)
    return q0, chain.fk_batch(q_true)


def half_space(dof: int) -> tuple[np.ndarray, np.ndarray]:
    """The general row ``dq_2 + 0.5 dq_3 <= 0.004``."""
    g = np.zeros((1, dof))
    g[0, 1], g[0, 2] = 1.0, 0.5
    return g, np.array([0.004])


# --- the peer -------------------------------------------------------------------------


def _quat(r: np.ndarray) -> tuple[float, float, float, float]:
    import mujoco

    out = np.zeros(4)
    mujoco.mju_mat2Quat(out, np.ascontiguousarray(r).reshape(9))
    return tuple(float(v) for v in out)  # type: ignore[return-value]


def mjcf(chain: Any) -> str:
    """A MuJoCo model of the chain: one body per joint frame, a site ``tip`` at the target."""
    opened, closing = [], []
    for j in chain.path:
        pos = " ".join(repr(float(v)) for v in j.origin[:3, 3])
        quat = " ".join(repr(v) for v in _quat(j.origin[:3, :3]))
        opened.append(
            f'<body name="{j.child}" pos="{pos}" quat="{quat}">'
            '<inertial pos="0 0 0" mass="0.1" diaginertia="1e-3 1e-3 1e-3"/>'
        )
        if j.dof == 1:
            lo, hi = j.bounds()
            kind = "slide" if j.type.name == "PRISMATIC" else "hinge"
            axis = " ".join(repr(float(v)) for v in j.axis)
            limit = (
                f'limited="true" range="{lo!r} {hi!r}"' if np.isfinite(lo) else 'limited="false"'
            )
            opened.append(f'<joint name="{j.name}" type="{kind}" axis="{axis}" {limit}/>')
        closing.append("</body>")
    body = "".join(opened) + '<site name="tip" pos="0 0 0"/>' + "".join(closing)
    return f'<mujoco><compiler angle="radian"/><worldbody>{body}</worldbody></mujoco>'


def fix_peer_limits() -> str:
    """The one-line fix of mink-warp 0.1.0's limits, applied in this process; its text."""
    import mink_warp.limits.configuration_limit as cl
    import mink_warp.limits.velocity_limit as vl
    import mujoco

    joints = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    cl._SCALAR_JOINTS = joints
    vl._SCALAR_JOINTS = joints
    return "_SCALAR_JOINTS = (int(mjJNT_HINGE), int(mjJNT_SLIDE))"


class Peer:
    """mink-warp on B worlds: Configuration, one FrameTask, ConstrainedSolver."""

    def __init__(self, chain: Any, q0: np.ndarray, targets: np.ndarray, row: bool) -> None:
        import mink_warp as mw
        import mujoco
        import warp as wp

        self.wp, self.chain = wp, chain
        self.model = mujoco.MjModel.from_xml_string(mjcf(chain))
        self.q0 = q0.astype(np.float32)
        self.cfg = mw.Configuration(self.model, q=self.q0, nworld=q0.shape[0], device="cpu")
        self.task = mw.FrameTask("tip", "site", position_cost=1.0, orientation_cost=0.3)
        wxyz = np.array([_quat(t[:3, :3]) for t in targets])
        self.task.set_target(
            np.concatenate([wxyz, targets[:, :3, 3]], axis=1).astype(np.float32),
            configuration=self.cfg,
        )
        velocities = {j.name: float(j.limit.velocity) for j in chain.joints}
        limits = [mw.ConfigurationLimit(self.model), mw.VelocityLimit(self.model, velocities)]
        if row:
            g, h = half_space(chain.dof)
            limits.append(mw.LinearInequalityLimit(g, h))
        self.solver = mw.ConstrainedSolver(self.cfg, limits=limits)

    def reset(self) -> np.ndarray:
        self.cfg.update(q=self.q0)
        return self.q0.astype(np.float64)

    def step(self) -> None:
        self.solver.solve_and_integrate([self.task], DT)
        self.wp.synchronize()

    def q(self) -> np.ndarray:
        return np.asarray(self.cfg.q.numpy(), dtype=np.float64)


class Ours:
    """hilbot's solve_ik on B worlds."""

    def __init__(self, chain: Any, q0: np.ndarray, targets: np.ndarray, row: bool) -> None:
        self.chain, self.q0 = chain, q0
        self.tasks = [FrameTargets(chain.target, targets)]
        self.limits: list[Any] = [ConfigurationLimit(), VelocityLimit(dt=DT)]
        if row:
            self.limits.append(LinearInequality(*half_space(chain.dof)))
        self.cfg = Configuration(chain, q0)

    def reset(self) -> np.ndarray:
        self.cfg = Configuration(self.chain, self.q0)
        return self.q0

    def step(self) -> None:
        v = solve_ik(self.cfg, self.tasks, DT, limits=self.limits)
        self.cfg = self.cfg.integrate(v, DT)

    def q(self) -> np.ndarray:
        return self.cfg.q


# --- measuring -----------------------------------------------------------------------------


class Tally:
    """Step times and the worst violations over the steps of one runner."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.violations = 0
        self.blown = 0
        self.worst = 0.0

    def check(self, chain: Any, before: np.ndarray, after: np.ndarray, row: bool) -> None:
        step = after - before
        bad = ~np.isfinite(after).all(axis=1) | (np.abs(step) > 1.0).any(axis=1)
        self.blown += int(bad.sum())
        excess = [
            np.maximum(chain.lower - after, after - chain.upper).max(axis=1),
            (np.abs(step) - chain.velocity_limit * DT).max(axis=1),
        ]
        if row:
            g, h = half_space(chain.dof)
            excess.append((step @ g.T)[:, 0] - h[0])
        worst = np.max(excess, axis=0)
        self.violations += int((worst > TOL).sum())
        self.worst = max(self.worst, float(np.nan_to_num(worst, nan=np.inf).max()))


def run(runner: Any, tally: Tally, row: bool) -> None:
    """One sample: STEPS steps from the seeds, timed step by step (thread CPU time)."""
    before = runner.reset()
    for _ in range(STEPS):
        start = time.thread_time()
        runner.step()
        tally.times.append(time.thread_time() - start)
        after = runner.q()
        tally.check(runner.chain, before, after, row)
        before = after


def compare(chain: Any, size: int, row: bool, repeats: int) -> dict[str, Tally]:
    """Peer and hilbot on the same worlds, samples interleaved."""
    q0, targets = worlds(chain, size)
    runners = {"mink-warp": Peer(chain, q0, targets, row), "hilbot": Ours(chain, q0, targets, row)}
    tallies = {name: Tally() for name in runners}
    for runner in runners.values():  # warm-up (the peer's kernels are cached by now)
        runner.reset()
        runner.step()
    for _ in range(repeats):
        for name, runner in runners.items():
            run(runner, tallies[name], row)
    return tallies


def rate(tally: Tally, size: int) -> float:
    """Median world-steps per second."""
    return size / float(np.median(tally.times))


def first_calls() -> tuple[float, float]:
    """Seconds of the first step (Panda, 10 worlds), each in a fresh process.

    mink-warp runs with an empty Warp kernel cache (it compiles), hilbot as shipped
    (it generates its kernels from the chain).
    """
    out = []
    for who in ("peer", "ours"):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, WARP_CACHE_PATH=cache)
            done = subprocess.run(
                [sys.executable, __file__, "--first-call", who, "--cache", cache],
                capture_output=True, text=True, check=True, env=env,
            )  # fmt: skip
        out.append(float(done.stdout.strip().splitlines()[-1]))
    return out[0], out[1]


def _first_call(who: str, cache: str) -> float:
    robot = load_urdf(ROBOTS / ARMS["Panda (7-DoF)"][0])
    chain = robot.path_between(*ARMS["Panda (7-DoF)"][1:])
    q0, targets = worlds(chain, 10, seed=1)
    start = time.perf_counter()
    if who == "peer":
        import warp as wp

        wp.config.kernel_cache_dir = cache
        wp.config.quiet = True
        wp.init()
        fix_peer_limits()
        Peer(chain, q0, targets, row=False).step()
    else:
        Ours(chain, q0, targets, row=False).step()
    return time.perf_counter() - start


def iterative(chain: Any, robot: Any, size: int) -> tuple[float, float, float, dict[str, int]]:
    """QPBatchSolver vs QPSolver (velocity limit, 50 iterations max): world-iterations/s."""
    q0, targets = worlds(chain, size, seed=2)
    limits = [VelocityLimit(dt=DT)]
    start = time.thread_time()
    out = QPBatchSolver(limits).solve_batch(
        robot, q0, chain.source, chain.target, targets, as_arrays=True
    )
    batch_s = time.thread_time() - start
    single, statuses = QPSolver(limits), {s.value: 0 for s in Status}
    start = time.thread_time()
    for b in range(size):
        try:
            solution = single.solve(robot, q0[b], chain.source, chain.target, targets[b])
        except IKError as exc:
            solution = exc.solution  # type: ignore[attr-defined]
        statuses[solution.status.value] += 1
    single_s = time.thread_time() - start
    iterations = float(out.iterations.sum())
    return (
        iterations / batch_s,
        iterations / single_s,
        float(out.orientation_residual.max()),
        statuses,
    )


def multitask_statuses(chain: Any, robot: Any, size: int) -> tuple[dict[str, int], float]:
    """MultiTaskSolver with a velocity limit, world by world: status counts, worst angle."""
    q0, targets = worlds(chain, size)
    solver, statuses, worst = MultiTaskSolver([VelocityLimit(dt=DT)]), {}, 0.0
    for b in range(size):
        try:
            solution = solver.solve(robot, q0[b], chain.source, chain.target, targets[b])
        except IKError as exc:
            solution = exc.solution  # type: ignore[attr-defined]
        statuses[solution.status.value] = statuses.get(solution.status.value, 0) + 1
        worst = max(worst, solution.orientation_residual or 0.0)
    return statuses, worst


def multitask_steps(chain: Any, size: int, repeats: int) -> tuple[float, float]:
    """solve_ik with a hand and a posture task per world, weighted and prioritized.

    Returns world-steps/s of each (joint + velocity limits, median over the steps).
    """
    q0, targets = worlds(chain, size)
    tasks = [
        FrameTargets(chain.target, targets),
        PostureTask({j.name: 0.0 for j in chain.joints}, weight=0.05),
    ]
    limits = [ConfigurationLimit(), VelocityLimit(dt=DT)]
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for prioritized in (False, True):  # interleaved
            cfg = Configuration(chain, q0)
            for _ in range(STEPS):
                start = time.thread_time()
                v = solve_ik(cfg, tasks, DT, limits=limits, prioritized=prioritized)
                cfg = cfg.integrate(v, DT)
                times[prioritized].append(time.thread_time() - start)
    return size / float(np.median(times[False])), size / float(np.median(times[True]))


# --- the report ------------------------------------------------------------------------------


def _table(rows: list[list[str]], head: list[str]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="samples of 20 steps per row")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--first-call", choices=("peer", "ours"), help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_call:
        print(_first_call(args.first_call, args.cache))
        return 0
    import warp as wp

    wp.config.quiet = True
    wp.init()
    load = os.getloadavg()[0]
    fix = fix_peer_limits()
    chains = {}
    for name, (urdf, source, tip) in ARMS.items():
        robot = load_urdf(ROBOTS / urdf)
        chains[name] = (robot, robot.path_between(source, tip))
    intro = (
        f"B worlds, one full-pose frame task each, dt {DT} s, {STEPS} steps per sample from "
        f"the same seeds, {args.repeats} samples per row interleaved with the peer; median "
        "thread CPU time per step (one step = solve + integrate + the kinematics of the next "
        "step). Peer: mink-warp 0.1.0 ConstrainedSolver on Warp's CPU backend (one thread, "
        f"float32), with its limits fixed in-process (`{fix}`: as installed, "
        "ConfigurationLimit limits no joint and VelocityLimit rejects every joint). "
    )
    lines: list[str] = []
    rows: list[list[str]] = []
    for label, row in (("joint + velocity limits", False), ("+ one half-space row", True)):
        for name in ("Panda (7-DoF)", "UR5 (6-DoF)"):
            tallies = compare(chains[name][1], 1000, row, args.repeats)
            peer, ours = tallies["mink-warp"], tallies["hilbot"]
            rows.append(
                [
                    name, label, f"{rate(ours, 1000):.3g}", f"{rate(peer, 1000):.3g}",
                    f"{rate(ours, 1000) / rate(peer, 1000):.2f}",
                    f"{ours.violations} / {ours.blown} ({ours.worst:.1e})",
                    f"{peer.violations} / {peer.blown} ({peer.worst:.1e})",
                ]
            )  # fmt: skip
            print(rows[-1], flush=True)
    lines += _table(
        rows,
        [
            "arm", "limits", "hilbot world-steps/s", "mink-warp world-steps/s", "ratio",
            "hilbot violations / blown up (worst)", "mink-warp violations / blown up (worst)",
        ],
    )  # fmt: skip
    lines += ["", "Growth with B (Panda, joint + velocity limits), world-steps/s:", ""]
    growth = []
    for size in (1, 10, 100, 1000, 10000):
        repeats = max(1, min(args.repeats, 20000 // max(size, 1)))
        tallies = compare(
            chains["Panda (7-DoF)"][1],
            size,
            False,
            max(1, repeats // 4) if size >= 1000 else repeats,
        )
        peer, ours = tallies["mink-warp"], tallies["hilbot"]
        growth.append(
            [str(size), f"{rate(ours, size):.3g}", f"{rate(peer, size):.3g}",
             f"{rate(ours, size) / rate(peer, size):.2f}",
             f"{ours.violations}", f"{peer.violations}"]
        )  # fmt: skip
        print(growth[-1], flush=True)
    lines += _table(
        growth, ["B", "hilbot", "mink-warp", "ratio", "hilbot violations", "mink-warp violations"]
    )
    lines += ["", "Growth with DoF (B = 1000, joint + velocity limits), world-steps/s:", ""]
    dofs = []
    for name in ARMS:
        tallies = compare(chains[name][1], 1000, False, max(2, args.repeats // 2))
        peer, ours = tallies["mink-warp"], tallies["hilbot"]
        dofs.append(
            [name, f"{rate(ours, 1000):.3g}", f"{rate(peer, 1000):.3g}",
             f"{rate(ours, 1000) / rate(peer, 1000):.2f}"]
        )  # fmt: skip
        print(dofs[-1], flush=True)
    lines += _table(dofs, ["arm", "hilbot", "mink-warp", "ratio"])
    peer_s, ours_s = first_calls()
    lines += [
        "",
        f"First step (Panda, 10 worlds): mink-warp {peer_s:.1f} s with an empty Warp kernel "
        f"cache (compiling), hilbot {ours_s * 1e3:.0f} ms (generating its kernels; no compiler).",
        "",
        "Iterative solves (velocity limit, up to 50 iterations, 1000 worlds, thread CPU "
        "time): world-iterations/s of QPBatchSolver (each world equal to QPSolver's answer) "
        "and of QPSolver in a loop; status counts of the QPSolver loop.",
        "",
    ]
    solves = []
    for name in ("Panda (7-DoF)", "UR5 (6-DoF)"):
        robot, chain = chains[name]
        batch_rate, single_rate, worst_angle, statuses = iterative(chain, robot, 1000)
        solves.append(
            [name, f"{batch_rate:.3g}", f"{single_rate:.3g}", f"{batch_rate / single_rate:.1f}",
             ", ".join(f"{k} {v}" for k, v in statuses.items() if v), f"{worst_angle:.1e}"]
        )  # fmt: skip
        print(solves[-1], flush=True)
    lines += _table(
        solves,
        [
            "arm",
            "QPBatchSolver",
            "QPSolver loop",
            "ratio",
            "QPSolver statuses",
            "worst orientation [rad]",
        ],
    )
    lines += [
        "",
        "Before the position-wins fix in `QPSolver` (commit 49c6b66, the same 1000 worlds and "
        "limits, measured once): Panda converged 495, stalled 430, timeout 75 (worst "
        "orientation 0.69 rad); UR5 converged 768, stalled 190, timeout 42 (0.77 rad).",
    ]
    lines += [
        "",
        "Multi-task set-ups (Panda, B = 1000, a hand frame task per world plus a posture "
        "task, joint + velocity limits): `solve_ik` weighted (one QP, the step of "
        "`MultiTaskSolver(prioritized=False)`) and `prioritized=True` (the hand's QP, then "
        "the posture's in its null space: `MultiTaskSolver`'s default step), world-steps/s:",
        "",
    ]
    weighted, prioritized = multitask_steps(chains["Panda (7-DoF)"][1], 1000, args.repeats)
    lines += _table([[f"{weighted:.3g}", f"{prioritized:.3g}"]], ["weighted", "prioritized"])
    lines += [
        "",
        "`MultiTaskSolver([VelocityLimit(dt=0.01)])`, 200 worlds world by world (the same "
        "seeds and targets), status counts and worst orientation:",
        "",
    ]
    mt_rows = []
    for name in ("Panda (7-DoF)", "UR5 (6-DoF)"):
        robot, chain = chains[name]
        statuses, worst = multitask_statuses(chain, robot, 200)
        mt_rows.append([name, ", ".join(f"{k} {v}" for k, v in statuses.items()), f"{worst:.1e}"])
        print(mt_rows[-1], flush=True)
    lines += _table(mt_rows, ["arm", "statuses", "worst orientation [rad]"])
    lines += [
        "",
        "Before the same fix in the multi-task loop (commit e2a5ebc's parent, measured once): "
        "Panda converged 97, timeout 103 (worst orientation 0.59 rad); UR5 converged 159, "
        "timeout 41 (0.50 rad).",
    ]
    body = "\n".join([intro + load_note(load, os.getloadavg()[0]), "", *lines])
    if args.no_write:
        print(body)
    else:
        write_section("ik-qp-batch", "IK: batched constrained IK vs mink-warp (CPU)", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
