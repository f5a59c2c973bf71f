"""Which IK solver a chain uses, and which of its options go to ``solver.solve``.

A module of its own so that the config models and the chain runner can both
depend on it without depending on each other.
"""

from __future__ import annotations

from hilbot._compat import StrEnum


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
