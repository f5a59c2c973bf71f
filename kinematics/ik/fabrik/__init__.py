"""FABRIK for position-only targets on serial revolute and prismatic chains."""

from hilbot.kinematics.ik.fabrik.fabrik_solver import FABRIKSolver

__all__ = ["FABRIKSolver"]
