"""Hard limits for the QP solvers: each builds box bounds or rows ``G dq <= h`` on a step."""

from hilbot.kinematics.ik.qp.limits.collision_avoidance import CollisionAvoidance, point_jacobian
from hilbot.kinematics.ik.qp.limits.configuration_limit import ConfigurationLimit
from hilbot.kinematics.ik.qp.limits.geometry import Capsule, Sphere, closest_points
from hilbot.kinematics.ik.qp.limits.limit import Constraint, Limit, LimitContext
from hilbot.kinematics.ik.qp.limits.linear_inequality import LinearInequality
from hilbot.kinematics.ik.qp.limits.velocity_limit import VelocityLimit

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
