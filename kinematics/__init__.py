"""Robot models from URDF, spatial math, forward kinematics, Jacobians and IK (numpy only)."""

from hilbot.kinematics import spatial
from hilbot.kinematics.chain import Chain
from hilbot.kinematics.errors import (
    KinematicsError,
    KinematicsWarning,
    MimicIgnored,
    NotAnAncestor,
    UnknownJoint,
    UnknownLink,
    UrdfError,
)
from hilbot.kinematics.joint import Joint, JointLimit, JointType, Link, Mimic
from hilbot.kinematics.robot import Robot
from hilbot.kinematics.urdf import load_urdf

__all__ = [
    "Chain",
    "Joint",
    "JointLimit",
    "JointType",
    "KinematicsError",
    "KinematicsWarning",
    "Link",
    "Mimic",
    "MimicIgnored",
    "NotAnAncestor",
    "Robot",
    "UnknownJoint",
    "UnknownLink",
    "UrdfError",
    "load_urdf",
    "spatial",
]
