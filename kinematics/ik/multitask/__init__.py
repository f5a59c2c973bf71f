"""The weighted multi-task solver for trees (bimanual, legged): several targets, one QP.

- ``multitask_solver``: ``MultiTaskSolver``;
- ``tasks``: the tasks it weighs (frames, elbow hints, posture, rest, manipulability,
  joint limits, self-collision);
- ``model``: the tree of chains and its per-iteration evaluation;
- ``terms``: each task's rows of the least-squares objective;
- ``iterate``: the iteration (one QP per step, shared with the QP solver's ``dense``);
- ``collision``: loading self-collision capsules from a data file.
"""

from hilbot.kinematics.ik.multitask.collision import CollisionDataError, load_self_collision
from hilbot.kinematics.ik.multitask.multitask_solver import MultiTaskSolver
from hilbot.kinematics.ik.multitask.tasks import (
    ElbowHint,
    FrameTask,
    JointLimitTask,
    ManipulabilityTask,
    PostureTask,
    RelativeFrameTask,
    RestTask,
    SelfCollision,
)

__all__ = [
    "CollisionDataError",
    "ElbowHint",
    "FrameTask",
    "JointLimitTask",
    "ManipulabilityTask",
    "MultiTaskSolver",
    "PostureTask",
    "RelativeFrameTask",
    "RestTask",
    "SelfCollision",
    "load_self_collision",
]
