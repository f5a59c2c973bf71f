"""The one set of tolerances a pose target is judged by, wherever it comes in.

``hilbot.kinematics.ik.parse_target`` applies them, and every door of the driver
(``Runtime.set_target``, MQTT, replays, trajectory files) parses its pose targets
with it, so a target accepted at a door is never refused later by a solver.
Kept in a module of their own so that code which only needs the numbers does not
import the solvers.
"""

from __future__ import annotations

#: Largest deviation of a rotation matrix from orthonormal, on each entry of
#: ``R^T R - I`` (a rotation is used as given, so it must be one already: values that
#: crossed JSON with 6 or more digits pass).
ROTATION_TOLERANCE = 1e-5
#: Largest ``|norm - 1|`` of a quaternion ``(w, x, y, z)``; it is then normalised, so a
#: looser bound costs nothing (4-digit components pass).
QUATERNION_TOLERANCE = 1e-3
#: Shortest tool axis (or quaternion) that still has a direction [unit-less].
MIN_DIRECTION_NORM = 1e-9
#: Largest position coordinate an IK target may have [m]: far beyond any robot, and
#: small enough that the solvers' squared errors stay finite (a 1e155 m target
#: overflowed them). A robot's own door may bound targets tighter (the driver: 100 m).
MAX_COORDINATE = 1e9

__all__ = ["MAX_COORDINATE", "MIN_DIRECTION_NORM", "QUATERNION_TOLERANCE", "ROTATION_TOLERANCE"]
