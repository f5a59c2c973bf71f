"""The hard limits of the QP solvers, where users import them (``hilbot.kinematics.ik.limits``).

They live with the QP solver, in ``hilbot.kinematics.ik.qp.limits``; this module
keeps their public import path.
"""

from hilbot.kinematics.ik.qp.limits import (
    Capsule,
    CollisionAvoidance,
    ConfigurationLimit,
    Constraint,
    Limit,
    LimitContext,
    LinearInequality,
    Sphere,
    VelocityLimit,
    closest_points,
    point_jacobian,
)

__all__ = [
    "Capsule",
    "CollisionAvoidance",
    "ConfigurationLimit",
    "Constraint",
    "Limit",
    "LimitContext",
    "LinearInequality",
    "Sphere",
    "VelocityLimit",
    "closest_points",
    "point_jacobian",
]
