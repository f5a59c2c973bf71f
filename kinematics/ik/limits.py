"""The hard limits of the QP solvers, where users import them (``hilbot.kinematics.ik.limits``).

They live with the QP solver, in ``hilbot.kinematics.ik.qp.limits``; this module
keeps their public import path, re-exporting that package's ``__all__`` (the one
list of their names).
"""

from hilbot.kinematics.ik.qp.limits import *  # noqa: F403
from hilbot.kinematics.ik.qp.limits import __all__ as __all__
