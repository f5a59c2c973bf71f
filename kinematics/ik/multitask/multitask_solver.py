"""``MultiTaskSolver``: weighted multi-task IK over one robot tree (bimanual, legged).

Tasks come in two levels, solved per iteration as two small QPs under the same
hard limits (joint limits with a gain, the per-call ``max_joint_delta`` box, extra
limits, and the margins of ``SelfCollision`` pairs):

1. primary: ``FrameTask`` and ``RelativeFrameTask`` rows (all hands and feet at
   once), weighted by their position and orientation weights;
2. secondary: ``ElbowHint``, ``PostureTask``, ``RestTask``, ``ManipulabilityTask``,
   ``JointLimitTask`` and the soft part of ``SelfCollision``, solved in the null
   space of the primary rows (``dq = dq1 + N z``), so they shape the redundancy
   without pulling the hands off their targets.

With ``prioritized=False`` every row goes into one weighted least-squares QP
instead (the pyroki style: one weighted sum of costs). ``max_reach`` is a soft
reach clamp: a frame target farther than it from its chain's first joint is
pulled in along the line to it, so the arm points at it instead of flailing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.box import Box, delta_bounds
from hilbot.kinematics.ik.core.solution import Solution, SolveMeta
from hilbot.kinematics.ik.core.solver import SolveOptions, Solver, check_options
from hilbot.kinematics.ik.core.target import Target
from hilbot.kinematics.ik.multitask.iterate import Problem, iterate
from hilbot.kinematics.ik.multitask.model import TreeModel
from hilbot.kinematics.ik.multitask.tasks import (
    FrameTask,
    PostureTask,
    RelativeFrameTask,
    RestTask,
    SelfCollision,
    Task,
)
from hilbot.kinematics.ik.qp.limits.collision_avoidance import CollisionAvoidance
from hilbot.kinematics.ik.qp.limits.configuration_limit import ConfigurationLimit
from hilbot.kinematics.ik.qp.limits.limit import Limit, check_limits, check_positive

Array = NDArray[np.float64]
_TASK_TYPES = Task.__args__


class MultiTaskSolver(Solver):
    """Weighted multi-task IK (see the module docstring).

    It is a ``Solver``: ``solve(...)`` moves one target link, with the solver's
    posture, rest and self-collision settings as secondary tasks. ``solve_tasks``
    moves several links of one tree at once.

    Args:
        limits: extra hard limits (``VelocityLimit``, ``LinearInequality`` ...).
        posture: home pose (joint name -> position) attracting the joints, or None.
        posture_weight: its weight.
        rest_weight: weight of staying near the start of the call (0: off).
        self_collision: capsule pairs kept apart (hard margin plus soft push), or None.
        max_reach: default soft reach clamp [m] for frame targets, or None.
        prioritized: secondary tasks in the primary null space (True) or one weighted sum.
        damping: Tikhonov damping of the primary QP, > 0.
        lm_damping: Levenberg-Marquardt damping scaled by the squared primary error.
        secondary_damping: damping of the secondary QP, > 0.
    """

    def __init__(
        self,
        limits: Sequence[Limit] = (),
        *,
        posture: Mapping[str, float] | None = None,
        posture_weight: float = 0.05,
        rest_weight: float = 0.0,
        self_collision: SelfCollision | None = None,
        max_reach: float | None = None,
        prioritized: bool = True,
        damping: float = 1e-9,
        lm_damping: float = 1e-3,
        secondary_damping: float = 1e-3,
    ) -> None:
        super().__init__()
        self.limits = check_limits(limits)
        self.posture_weight = check_positive("posture_weight", posture_weight)
        self._posture = None if posture is None else PostureTask(posture, self.posture_weight)
        self.rest_weight = check_positive("rest_weight", rest_weight, allow_zero=True)
        if self_collision is not None and not isinstance(self_collision, SelfCollision):
            raise TypeError("self_collision must be a SelfCollision task")
        self.self_collision = self_collision
        self.max_reach = None if max_reach is None else check_positive("max_reach", max_reach)
        self.prioritized = bool(prioritized)
        self.damping = check_positive("damping", damping)
        self.lm_damping = check_positive("lm_damping", lm_damping, allow_zero=True)
        self.secondary_damping = check_positive("secondary_damping", secondary_damping)
        self._models: dict[tuple[int, str], TreeModel] = {}
        self._chain_models: dict[int, tuple[Any, TreeModel]] = {}

    @property
    def posture(self) -> Mapping[str, float] | None:
        """The home pose secondary task (joint name -> position), or None."""
        return None if self._posture is None else self._posture.pose

    def set_posture(self, pose: Mapping[str, float] | None) -> None:
        """Set (or clear, with None) the home pose the joints are attracted to."""
        self._posture = None if pose is None else PostureTask(pose, self.posture_weight)

    # --- the shared single-target call ----------------------------------------------------

    def _solve(
        self, chain: Any, q0: Array, target: Target, box: Box, options: SolveOptions
    ) -> tuple[Array, SolveMeta]:
        """One frame task on ``chain`` plus the solver's secondary settings."""
        cached = self._chain_models.get(id(chain))
        if cached is None or cached[0] is not chain:
            cached = (chain, TreeModel.from_chain(chain))
            self._chain_models[id(chain)] = cached
        model = cached[1]
        tasks: list[Task] = [FrameTask(chain.target, target)]
        tasks += self._default_tasks(model)
        problem = self._problem(model, tasks, options.respect_limits, self.max_reach)
        q, meta = iterate(problem, q0, box.lower, box.upper, options)
        return q, meta

    def _default_tasks(self, model: TreeModel) -> list[Task]:
        tasks: list[Task] = []
        if self._posture is not None:
            known = {k: v for k, v in self._posture.pose.items() if k in model.joints}
            if known:
                tasks.append(PostureTask(known, self._posture.weight))
        if self.rest_weight > 0.0:
            tasks.append(RestTask(self.rest_weight))
        if self.self_collision is not None:
            links = {g.link for pair in self.self_collision.pairs for g in pair}
            if all(_has_link(model, link) for link in links):
                tasks.append(self.self_collision)
        return tasks

    # --- several tasks at once -------------------------------------------------------------

    def solve_tasks(
        self,
        robot: Any,
        state_or_positions: Any,
        tasks: Sequence[Task],
        *,
        root_link: str | None = None,
        max_iterations: int = 50,
        tolerance: float = 1e-4,
        orientation_tolerance: float = 0.01,
        max_joint_delta: float | None = None,
        respect_limits: bool = True,
        initial_positions: Any = None,
        max_reach: float | None = None,
        use_defaults: bool = True,
    ) -> Solution:
        """Solve several tasks on one robot tree in one call.

        Args:
            robot: the ``Robot``.
            state_or_positions: joint state, mapping joint -> position, or flat (nv,)
                array in the model's columns; joints outside the tree come back unchanged.
            tasks: the tasks (``FrameTask``, ``RelativeFrameTask``, ``ElbowHint`` ...).
            root_link: frame of poses and the root of the tree solved (default: the
                robot's root link). On a floating-base robot, the root above the
                floating joint frees the base; the link below it fixes the base.
            max_iterations: iteration budget.
            tolerance: position tolerance of the frame tasks [m].
            orientation_tolerance: orientation tolerance of the frame tasks [rad].
            max_joint_delta: largest change of any joint coordinate in this call.
            respect_limits: keep every joint within its limits.
            initial_positions: the seed (default: ``state_or_positions``).
            max_reach: soft reach clamp [m] for frame targets (default: the solver's).
            use_defaults: add the solver's posture, rest and self-collision settings.

        Returns:
            A ``Solution`` over every joint of the tree; ``reached`` when every frame
            task is within tolerance (position and, where asked, orientation);
            ``residual`` and ``orientation_residual`` are the worst over the frame
            tasks. Unreached solves are returned, not raised: check ``reached``.

        Raises:
            ValueError: a bad option, or a task that is not a task.
            KinematicsError: a task names a link outside the tree.
        """
        check_options(
            max_iterations,
            tolerance,
            orientation_tolerance,
            max_joint_delta,
            delta_name="max_joint_delta",
        )
        root = robot.root_link if root_link is None else root_link
        model = self._tree(robot, root)
        tasks = list(tasks)
        for task in tasks:
            if not isinstance(task, _TASK_TYPES):
                raise ValueError(f"not a task: {task!r}")
        q_state, base = model.read(state_or_positions)
        q0 = q_state if initial_positions is None else model.read(initial_positions)[0]
        lower, upper = _box(model, q0, respect_limits, max_joint_delta)
        q0 = np.minimum(np.maximum(q0, lower), upper)
        if use_defaults:
            tasks += self._default_tasks(model)
        reach = self.max_reach if max_reach is None else check_positive("max_reach", max_reach)
        problem = self._problem(model, tasks, respect_limits, reach)
        opts = SolveOptions(
            max_iterations, tolerance, orientation_tolerance, False, respect_limits, None
        )
        q, meta = iterate(problem, q0, lower, upper, opts)
        q = np.minimum(np.maximum(q, lower), upper)
        reached = meta.residual <= tolerance and (
            meta.orientation_residual is None or meta.orientation_residual <= orientation_tolerance
        )
        return Solution(
            q,
            meta.iterations,
            meta.residual,
            meta.orientation_residual,
            reached,
            meta.status,
            base,
            model.to_dict,
        )

    def _tree(self, robot: Any, root: str) -> TreeModel:
        key = (id(robot), root)
        model = self._models.get(key)
        if model is None or model.robot is not robot:
            model = TreeModel(robot, root)
            self._models[key] = model
        return model

    def _problem(
        self,
        model: TreeModel,
        tasks: Sequence[Task],
        respect_limits: bool,
        max_reach: float | None,
    ) -> Problem:
        limits: list[Limit] = list(self.limits)
        if respect_limits and not any(isinstance(lim, ConfigurationLimit) for lim in limits):
            limits.append(ConfigurationLimit())
        primary: list[FrameTask] = []
        secondary: list[Task] = []
        collisions: list[tuple[SelfCollision, CollisionAvoidance]] = []
        for task in tasks:
            if isinstance(task, FrameTask):
                primary.append(task)
            elif isinstance(task, RelativeFrameTask):
                primary.append(task.as_frame_task())
            else:
                secondary.append(task)
            if isinstance(task, SelfCollision):
                hard = CollisionAvoidance(
                    task.pairs, margin=task.margin, detection_distance=task.detection_distance
                )
                limits.append(hard)
                collisions.append((task, hard))
        for task in primary:
            model.chain(task.link)
            if task.source_link is not None:
                model.chain(task.source_link)
        return Problem(
            model,
            tuple(primary),
            tuple(secondary),
            tuple(limits),
            max_reach,
            self.prioritized,
            self.damping,
            self.lm_damping,
            self.secondary_damping,
            tuple(collisions),
        )


def _has_link(model: TreeModel, link: str) -> bool:
    try:
        model.chain(link)
    except Exception:
        return False
    return True


def _box(
    model: TreeModel, q0: Array, respect_limits: bool, max_delta: float | None
) -> tuple[Array, Array]:
    """Limits (if respected) ∩ ``q0 ± max_delta``; a seed past a limit may stay or go back."""
    lower = model.lower if respect_limits else np.full(model.nv, -np.inf)
    upper = model.upper if respect_limits else np.full(model.nv, np.inf)
    if max_delta is None:
        return lower.copy(), upper.copy()
    return delta_bounds(q0, max_delta, (lower, upper) if respect_limits else None)


__all__ = ["MultiTaskSolver"]
