"""IK chains as the runtime uses them: one solver per chain, warm-started every cycle.

A :class:`ChainRunner` maps a chain's joints onto the runtime's joint vector,
solves a pose target from the last command (so tracking never jumps to another
arm branch), and skips the solve when the target has not changed since a solve
that reached it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import StrEnum
from hilbot.driver.runtime.safety import JointLimits

if TYPE_CHECKING:  # the config models import this module (through validation)
    from hilbot.driver.runtime.config import ChainConfig


def limited_robot(robot: Any, limits: JointLimits) -> Any:
    """A copy of ``robot`` whose driven joints carry the runtime's effective limits.

    The solvers respect the model's limits inside their iteration (so the error is
    redistributed to the free joints); giving them the soft limits and margins the
    safety layer enforces keeps a solution from parking a joint where the safety
    layer would clip it, which would stall tracking short of the target.
    """
    import dataclasses

    from hilbot.kinematics import JointLimit, JointType, Robot

    bounds = limits.as_dict()
    joints = []
    for joint in robot.joints.values():
        if joint.name in bounds and joint.mimic is None:
            lower, upper = bounds[joint.name]
            old = joint.limit
            kind = JointType.REVOLUTE if joint.type is JointType.CONTINUOUS else joint.type
            joint = dataclasses.replace(
                joint,
                type=kind,
                limit=JointLimit(
                    lower,
                    upper,
                    old.velocity if old is not None else 0.0,
                    old.effort if old is not None else 0.0,
                ),
            )
        joints.append(joint)
    return Robot(robot.name, list(robot.links), joints)


def make_solver(kind: SolverKind, options: Mapping[str, Any]) -> Any:
    """Instantiate the solver of ``kind`` with its constructor options."""
    from hilbot.kinematics import ik

    cls = {
        SolverKind.DLS: "DLSSolver",
        SolverKind.QP: "QPSolver",
        SolverKind.FABRIK: "FABRIKSolver",
        SolverKind.MULTITASK: "MultiTaskSolver",
    }[kind]
    return getattr(ik, cls)(**options)


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a chain's options into (solve options, constructor options)."""
    solve = {k: v for k, v in options.items() if k in SOLVE_OPTIONS}
    build = {k: v for k, v in options.items() if k not in SOLVE_OPTIONS}
    return solve, build


class ChainRunner:
    """One IK chain of the runtime.

    Args:
        robot: the kinematic model.
        config: the chain's config.
        names: the runtime's joint vector names.
        max_delta: unused unless the chain's options set ``max_delta``: by default
            the solver returns the whole solution and the safety layer scales the step
            towards it as one vector (per-solve boxes made DLS stall near limits).
    """

    def __init__(
        self, robot: Any, config: ChainConfig, names: Sequence[str], max_delta: float
    ) -> None:
        self.name = config.name
        self.config = config
        self.robot = robot
        self.chain = robot.path_between(config.source_link, config.target_link)
        solve_options, build_options = split_options(config.options)
        self.solver = make_solver(config.solver, build_options)
        self._options = dict(solve_options)
        # The chain's configuration vector, in Jacobian column order, maps one to one onto
        # driven joints (the config check guarantees every column's joint is a 1-DoF servo
        # joint), so seeds and solutions move as flat arrays without building dicts.
        columns = self.chain.jacobian_columns
        self.joints = tuple(joint for joint, _ in columns)
        missing = [j for j in self.joints if j not in names]
        if missing:
            raise ValueError(f"chain {config.name!r}: joints {missing} are not driven")
        self.indices = np.array([list(names).index(j) for j in self.joints], dtype=np.intp)
        self._names = tuple(names)
        self.last_seq = -1
        self.last_reached = False
        self.last_q: NDArray[np.float64] | None = None  # (dof,) the newest solve's result
        self.last_error: str | None = None  # the newest solve error, reported once

    def needs_solve(self, seq: int) -> bool:
        """Whether the target with sequence number ``seq`` still needs solving."""
        return seq != self.last_seq or not self.last_reached

    def solve(
        self,
        target: Any,
        seq: int,
        seed: NDArray[np.float64],
        overrides: Mapping[str, Any] | None = None,
    ) -> tuple[NDArray[np.float64] | None, Any, bool]:
        """Solve ``target`` from ``seed`` (the last command, in runtime joint order).

        ``overrides``: solve options that replace the chain's for this solve.

        Returns ``(chain joint values or None, solution or error, reached)``. A failed
        solve returns its best-effort positions when it has them, else ``None`` (hold).

        Raises:
            Exception: anything but a ``KinematicsError`` from the solver (a bug, an
                overflow): the runtime faults on it. This runner is left as if the
                target had failed, so it is solved again, never taken as reached.
        """
        from hilbot.kinematics.errors import KinematicsError

        self.last_seq = seq
        self.last_q = None
        self.last_reached = False
        try:
            solution = self.solver.solve(
                self.robot,
                seed[self.indices],
                self.config.source_link,
                self.config.target_link,
                target,
                **(self._options if overrides is None else {**self._options, **overrides}),
            )
        except KinematicsError as exc:
            self.last_reached = False
            best = getattr(exc, "positions", None)
            if not best:
                return None, exc, False
            self.last_q = self._pick(best, seed)
            return self.last_q, exc, False
        # Settled: the whole target met, or the position met with the orientation as good
        # as the arm allows (position wins, stalled: not out of iterations). Solving the
        # same target again would change nothing.
        self.last_reached = bool(solution.reached) or (
            bool(solution.position_reached) and solution.status != "timeout"
        )
        self.last_q = solution.q
        return self.last_q, solution, self.last_reached

    def _pick(
        self, positions: Mapping[str, float], seed: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        return np.array(
            [positions.get(j, seed[i]) for j, i in zip(self.joints, self.indices, strict=True)],
            dtype=np.float64,
        )

    def pose(self, positions: Mapping[str, float]) -> NDArray[np.float64]:
        """Forward kinematics: the 4 x 4 pose of the target link in the source link."""
        pose: NDArray[np.float64] = self.chain.fk(self.chain.q_from(positions))
        return pose


# --- Which IK solver a chain uses, and which of its options go to ``solver.solve``.
class SolverKind(StrEnum):
    """The IK solver a chain uses (``hilbot.kinematics.ik``)."""

    DLS = "dls"
    QP = "qp"
    FABRIK = "fabrik"
    MULTITASK = "multitask"


#: Options a chain may pass to ``solver.solve``; any other option goes to the solver's constructor.
SOLVE_OPTIONS = frozenset(
    {
        "max_iterations",
        "tolerance",
        "orientation_tolerance",
        "strict_orientation",
        "respect_limits",
        "max_delta",
    }
)
