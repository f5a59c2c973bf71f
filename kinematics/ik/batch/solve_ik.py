"""``solve_ik``: one differential IK step under hard limits, mink's functional call shape.

::

    v = solve_ik(configuration, tasks, dt, limits=None)   # (dof,) or (B, dof) [rad/s]
    configuration = configuration.integrate(v, dt)

Each call linearises every task at ``configuration.q`` and solves, per world, the
QP ``QPSolver`` solves in one iteration,

    ``min_dq  sum_t |A_t dq - b_t|^2 + (damping + lm_damping |b|^2) |dq|^2``
    ``s.t.    the limits' box and rows``

and returns ``v = dq / dt``. The rows ``A_t, b_t`` are ``QPSolver``'s
(``qp_solver.task_rows``: weighted, with the error clamped per step) for a
``FrameTask`` (the multi-task solver's task value: ``link``, ``target``,
``position_weight``, ``orientation_weight``) or a ``FrameTargets`` (one target per
world), and ``weight (q_home - q)`` for a ``PostureTask``. Limits:

- ``limits=None``: the default ``ConfigurationLimit()``;
- ``limits=[]``: none (unconstrained damped least squares);
- ``limits=[...]``: those (``VelocityLimit`` bounds ``|dq| <= v_max dt`` with the
  call's ``dt``);
- ``solver=QPSolver(...)`` or ``QPBatchSolver(...)``: that solver's limits (plus the
  default ``ConfigurationLimit`` unless it has one) and damping; passing ``limits``
  as well raises ``ValueError``, as in mink-warp.

The box path is exact; rows are solved by the dense dual active set, world by world
in lockstep (``qp_dense``): every returned step meets every limit.

Several tasks per world make one weighted least-squares QP: each world's step is
the step ``MultiTaskSolver(limits, prioritized=False)`` takes from the same
configuration with the same task objects (its rows, damping and limits; equal to
rounding, tested), so a multi-task set-up (hands, elbow, posture) runs on B worlds
at once. ``prioritized=True`` is ``MultiTaskSolver``'s default (prioritized) step
instead: the frame tasks' QP under the limits, then the posture tasks' QP in the
null space of the frame rows, under the same limits (``priority``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.batch.configuration import Configuration
from hilbot.kinematics.ik.batch.fk import Kernel, fast_kernel_for
from hilbot.kinematics.ik.batch.inputs import parse_targets
from hilbot.kinematics.ik.batch.priority import SECONDARY_DAMPING, null_space_steps
from hilbot.kinematics.ik.batch.qp_box import solve_box_batch
from hilbot.kinematics.ik.batch.qp_limits import gather_batch
from hilbot.kinematics.ik.batch.qp_rows import Targets, task_rows_batch
from hilbot.kinematics.ik.batch.qp_run import general_steps
from hilbot.kinematics.ik.core.target import OrientationKind, Target
from hilbot.kinematics.ik.qp.limits.configuration_limit import ConfigurationLimit
from hilbot.kinematics.ik.qp.limits.limit import Limit, check_limits, check_positive
from hilbot.kinematics.ik.qp.limits.linear_inequality import LinearInequality
from hilbot.kinematics.ik.qp.limits.velocity_limit import VelocityLimit
from hilbot.kinematics.ik.qp.qp_solver import ChainContext

Array = NDArray[np.float64]
_DAMPING = 1e-9  # QPSolver's defaults
_LM_DAMPING = 1e-3


class FrameLike(Protocol):
    """A frame task: ``hilbot.kinematics.ik.FrameTask`` (the multi-task solver's) fits."""

    link: str
    source_link: str | None
    position_weight: float
    orientation_weight: float
    parsed: Target


class PostureLike(Protocol):
    """A posture task: ``hilbot.kinematics.ik.PostureTask`` fits."""

    pose: Mapping[str, float]
    weight: float


@dataclass(frozen=True)
class FrameTargets:
    """Bring ``link`` to one target per world (``solve_ik`` on B worlds).

    Attributes:
        link: the link to move (on the configuration's chain).
        targets: (B, 3) positions, (B, 4, 4) transforms, or B targets of one kind.
        position_weight: weight of the position rows.
        orientation_weight: weight of the orientation rows [m/rad].
        parsed: the parsed targets (computed).
    """

    link: str
    targets: Any
    position_weight: float = 1.0
    orientation_weight: float = 0.3
    parsed: Targets = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.link, str) or not self.link:
            raise ValueError(f"FrameTargets: link must be a link name, got {self.link!r}")
        check_positive("FrameTargets position_weight", self.position_weight)
        check_positive("FrameTargets orientation_weight", self.orientation_weight)
        object.__setattr__(self, "parsed", parse_targets(self.targets))


class _Unset:
    """The default of ``limits``: not given (the default configuration limit)."""


_UNSET = _Unset()


def solve_ik(
    configuration: Configuration,
    tasks: Sequence[FrameLike | PostureLike | FrameTargets],
    dt: float,
    *,
    limits: Sequence[Limit] | _Unset | None = _UNSET,
    solver: Any = None,
    damping: float | None = None,
    prioritized: bool = False,
) -> Array:
    """One differential IK step: the joint velocity ``v`` [rad/s] of every world.

    Args:
        configuration: the chain and its configuration(s).
        tasks: frame and posture tasks (see the module docstring).
        dt: the step's duration [s]; ``dq = v dt``.
        limits: ``None`` (or not given): the default ``ConfigurationLimit``; ``[]``:
            none; else the hard limits.
        solver: a ``QPSolver`` or ``QPBatchSolver`` whose limits and damping to use.
        damping: Tikhonov damping (default: the solver's, else ``QPSolver``'s 1e-9).
        prioritized: the frame tasks first, the posture tasks in their null space
            (``MultiTaskSolver``'s default step) instead of one weighted sum.

    Returns:
        (dof,) for a single-world configuration, (B, dof) for B worlds.

    Raises:
        ValueError: ``dt`` not finite and positive, no task, ``solver`` and ``limits``
            both given, a task's link, joint or source frame not on the chain, or
            per-world targets whose count is not B, or ``prioritized`` without a
            frame task.
        TypeError: a task or limit of an unknown kind.
    """
    dt = check_positive("dt", dt)
    chosen, tikhonov, lm = _settings(limits, solver, damping, dt)
    if not tasks:
        raise ValueError("solve_ik needs at least one task")
    q = configuration.worlds
    if prioritized:
        primary = [t for t in tasks if not _is_posture(t)]
        secondary = [t for t in tasks if _is_posture(t)]
        if not primary:
            raise ValueError("prioritized=True needs a frame task (the primary level)")
        a, b = _rows(configuration, primary, q)
    else:
        secondary = []
        a, b = _rows(configuration, tasks, q)
    n = q.shape[1]
    at = a.transpose(0, 2, 1)
    h_mat = at @ a
    bb = (b[:, None, :] @ b[:, :, None])[:, 0, 0]
    h_mat[:, np.arange(n), np.arange(n)] += (tikhonov + lm * bb)[:, None]
    c = -(at @ b[:, :, None])[:, :, 0]
    unbounded = np.full(q.shape, np.inf)
    info = configuration.info
    contexts = None
    if any(type(lim) not in _VECTORISED for lim in chosen):
        contexts = [ChainContext(configuration.chain, row, info.names) for row in q]
    cons = gather_batch(chosen, configuration.chain, info.names, q, -unbounded, unbounded, contexts)
    if cons.g is None:
        held = configuration.held
        guess = held if held is not None and held[0].shape == q.shape else None
        box = solve_box_batch(h_mat, c, cons.lower, cons.upper, guess, exact=False)
        configuration.held = (box.lower, box.upper)
        dq = box.x
    else:
        dq = general_steps(h_mat, c, cons)[0]
    if secondary:
        a2, b2 = _rows(configuration, secondary, q)
        dq = null_space_steps(dq, a, a2, b2, cons, SECONDARY_DAMPING)
    v: Array = dq / dt
    return v if configuration.batched else v[0]


_VECTORISED = (ConfigurationLimit, VelocityLimit, LinearInequality)


def _is_posture(task: Any) -> bool:
    return not isinstance(task, FrameTargets) and not (
        hasattr(task, "parsed") and hasattr(task, "link")
    )


def _settings(
    limits: Sequence[Limit] | _Unset | None, solver: Any, damping: float | None, dt: float
) -> tuple[tuple[Limit, ...], float, float]:
    """The limits, damping and LM damping of the call."""
    if solver is not None:
        if not isinstance(limits, _Unset):
            raise ValueError(
                "pass limits= or solver=, not both: the solver already has its limits "
                "(build it with the limits you want, or drop solver=)"
            )
        reference = getattr(solver, "reference", solver)  # QPBatchSolver wraps a QPSolver
        chosen = tuple(getattr(reference, "limits", None) or ())
        if not hasattr(reference, "lm_damping"):
            raise TypeError(f"solver must be a QPSolver or QPBatchSolver, got {solver!r}")
        tikhonov = reference.damping if damping is None else damping
        lm = float(reference.lm_damping)
        if not any(isinstance(lim, ConfigurationLimit) for lim in chosen):
            chosen = (*chosen, ConfigurationLimit())
    else:
        chosen = (
            (ConfigurationLimit(),)
            if limits is None or isinstance(limits, _Unset)
            else tuple(limits)
        )
        tikhonov = _DAMPING if damping is None else damping
        lm = _LM_DAMPING
    chosen = check_limits(chosen)
    check_positive("damping", tikhonov)
    # A velocity limit bounds this call's step: v_max * dt with the call's dt.
    chosen = tuple(
        VelocityLimit(lim.velocities, dt) if type(lim) is VelocityLimit and lim.dt != dt else lim
        for lim in chosen
    )
    return chosen, tikhonov, lm


def _rows(configuration: Configuration, tasks: Sequence[Any], q: Array) -> tuple[Array, Array]:
    """The stacked weighted rows (B, k, n) and errors (B, k) of every task in every world."""
    parts: list[tuple[Array, Array]] = []
    kernel: list[Kernel] = []
    for task in tasks:
        if isinstance(task, FrameTargets):
            parts.append(_frame_rows(configuration, task.link, None, task.parsed, task, q, kernel))
        elif hasattr(task, "parsed") and hasattr(task, "link"):
            one = task.parsed
            targets = _broadcast(one, q.shape[0])
            parts.append(
                _frame_rows(configuration, task.link, task.source_link, targets, task, q, kernel)
            )
        elif hasattr(task, "pose") and hasattr(task, "weight"):
            parts.append(_posture_rows(configuration, task, q))
        else:
            raise TypeError(
                f"solve_ik takes FrameTask, FrameTargets and PostureTask tasks, got {task!r}"
            )
    if len(parts) == 1:
        return parts[0]
    a = np.concatenate([p[0] for p in parts], axis=1)
    b = np.concatenate([p[1] for p in parts], axis=1)
    return a, b


def _frame_rows(
    configuration: Configuration,
    link: str,
    source: str | None,
    targets: Targets,
    task: Any,
    q: Array,
    kernel: list[Kernel],
) -> tuple[Array, Array]:
    chain = configuration.chain
    if source is not None and source != chain.source:
        raise ValueError(
            f"a task's source_link must be the chain's source {chain.source!r}, got {source!r}"
        )
    if link not in chain.links:
        raise ValueError(f"link {link!r} is not on {chain!r}; its links: {', '.join(chain.links)}")
    if targets.point.shape[0] != q.shape[0]:
        raise ValueError(f"{targets.point.shape[0]} targets for {q.shape[0]} worlds")
    if link == chain.target and configuration.info.scalar:
        if not kernel:
            kernel.append(fast_kernel_for(chain))
        pose, jac = kernel[0](q)
    else:
        pose = np.array([chain.link_poses(row)[link] for row in q])
        jac = np.array([chain.jacobian_at(link, row) for row in q])
    weights = np.full(q.shape[0], float(task.orientation_weight))
    rows = task_rows_batch(pose, jac, targets, float(task.position_weight), weights, exact=False)
    return rows.a, rows.b


def _broadcast(target: Target, size: int) -> Targets:
    """One target for every world (contiguous copies: matmul rounds strided views otherwise)."""
    point = np.tile(np.array(target.point), (size, 1))
    if target.kind is OrientationKind.NONE:
        return Targets(target.kind, point, None)
    one = np.array(target.orientation)
    if target.kind is OrientationKind.FULL:
        return Targets(target.kind, point, np.tile(one.reshape(3, 3), (size, 1, 1)))
    return Targets(target.kind, point, np.tile(one, (size, 1)))


def _posture_rows(configuration: Configuration, task: Any, q: Array) -> tuple[Array, Array]:
    names = configuration.info.names
    unknown = sorted(set(task.pose) - set(names))
    if unknown:
        raise ValueError(f"PostureTask joints not on the chain: {unknown}; its joints: {names}")
    cols = [i for i, name in enumerate(names) if name in task.pose]
    # A task of another kind than PostureTask (which checks itself) is checked here: a
    # non-finite home or weight would make every world's step NaN.
    weight = float(task.weight)
    if not (math.isfinite(weight) and weight > 0.0):
        raise ValueError(f"a posture task's weight must be finite and > 0, got {task.weight!r}")
    bad = [names[i] for i in cols if not math.isfinite(float(task.pose[names[i]]))]
    if bad:
        raise ValueError(f"a posture task's home positions must be finite: {bad}")
    a = np.zeros((q.shape[0], len(cols), q.shape[1]))
    a[:, np.arange(len(cols)), cols] = weight
    home = np.array([task.pose[names[i]] for i in cols])
    return a, weight * (home - q[:, cols])


__all__ = ["FrameTargets", "solve_ik"]
