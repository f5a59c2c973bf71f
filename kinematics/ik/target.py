"""IK targets: every accepted form parsed once into a small frozen value.

Accepted forms (all in the source link's frame, metres):

- a position ``(3,)``;
- ``(position, None)``: position only;
- ``(position, axis (3,))``: the target link's z-axis points along ``axis``
  (any non-zero length; it is normalised);
- ``(position, quaternion (4,))`` as ``(w, x, y, z)``, unit length within 1e-6;
- ``(position, rotation (3, 3))``, orthonormal with determinant +1 within 1e-6;
- a 4x4 homogeneous transform (last row ``0 0 0 1``).

Anything else, or any NaN or infinite value, raises ``InvalidTarget``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.errors import InvalidTarget

_UNIT_TOLERANCE = 1e-6  # quaternion norm and R^T R - I, in absolute terms
_EYE3 = np.eye(3)


class OrientationKind(enum.Enum):
    """What a target asks of the target link's orientation."""

    NONE = "none"
    AXIS = "axis"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed IK target; build with ``parse_target``.

    Attributes:
        position: (3,) target position in the source frame [m].
        kind: what the orientation part asks for.
        rotation: (3, 3) target rotation for ``FULL``, else ``None``.
        axis: (3,) unit direction of the target link's z-axis for ``AXIS``, else ``None``.
    """

    position: NDArray[np.float64]
    kind: OrientationKind = OrientationKind.NONE
    rotation: NDArray[np.float64] | None = None
    axis: NDArray[np.float64] | None = None

    def transform(self) -> NDArray[np.float64]:
        """The target as a 4x4 transform (identity rotation unless ``FULL``)."""
        out = np.eye(4)
        out[:3, 3] = self.position
        if self.rotation is not None:
            out[:3, :3] = self.rotation
        return out


def parse_target(value: object) -> Target:
    """Parse any accepted target form into a ``Target``.

    Args:
        value: a ``Target``, a position, a ``(position, orientation)`` pair or a 4x4 transform.

    Returns:
        The parsed target, with validated, read-only float64 arrays.

    Raises:
        InvalidTarget: on a wrong shape, NaN or infinite values, a zero axis, a
            non-unit quaternion or a matrix that is not a proper rotation.
    """
    if isinstance(value, Target):
        return value
    if isinstance(value, tuple | list) and len(value) == 2:
        first = value[0]
        if not _is_scalar(first):
            return _parse_pair(first, value[1], value)
    array = _as_float_array(value, value)
    if array.shape == (3,):
        return Target(_finite(array, value))
    if array.shape == (4, 4):
        return _parse_transform(array, value)
    raise InvalidTarget(f"unsupported shape {array.shape}", value)


def _parse_pair(position: object, orientation: object, value: object) -> Target:
    pos = _as_float_array(position, value)
    if pos.shape != (3,):
        raise InvalidTarget(f"position must have shape (3,), got {pos.shape}", value)
    pos = _finite(pos, value)
    if orientation is None:
        return Target(pos)
    ori = _finite(_as_float_array(orientation, value), value)
    if ori.shape == (3,):
        norm = math.sqrt(float(ori @ ori))
        if norm < 1e-12:
            raise InvalidTarget("the tool axis has zero length", value)
        return Target(pos, OrientationKind.AXIS, axis=_frozen(ori / norm))
    if ori.shape == (4,):
        return Target(pos, OrientationKind.FULL, rotation=_quaternion_to_rotation(ori, value))
    if ori.shape == (3, 3):
        return Target(pos, OrientationKind.FULL, rotation=_check_rotation(ori, value))
    raise InvalidTarget(
        f"orientation must be None, an axis (3,), a quaternion (4,) or a rotation (3, 3), "
        f"got shape {ori.shape}",
        value,
    )


def _parse_transform(array: NDArray[np.float64], value: object) -> Target:
    array = _finite(array, value)
    bottom = array[3]
    if abs(bottom[0]) + abs(bottom[1]) + abs(bottom[2]) + abs(bottom[3] - 1.0) > 1e-9:
        raise InvalidTarget("the last row of a 4x4 transform must be [0, 0, 0, 1]", value)
    rotation = _check_rotation(array[:3, :3], value)
    return Target(_frozen(array[:3, 3]), OrientationKind.FULL, rotation=rotation)


def _check_rotation(matrix: NDArray[np.float64], value: object) -> NDArray[np.float64]:
    error = float(np.abs(matrix.T @ matrix - _EYE3).max())
    if error > _UNIT_TOLERANCE:
        raise InvalidTarget(f"the rotation is not orthonormal (|R^T R - I| = {error:.3g})", value)
    (a, b, c), (d, e, f), (g, h, i) = matrix.tolist()
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    if det < 0.0:
        raise InvalidTarget("the rotation is a reflection (determinant -1)", value)
    return _frozen(matrix)


def _quaternion_to_rotation(quat: NDArray[np.float64], value: object) -> NDArray[np.float64]:
    w, x, y, z = quat.tolist()
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    if abs(norm - 1.0) > _UNIT_TOLERANCE:
        raise InvalidTarget(
            f"the quaternion (w, x, y, z) must have unit norm, got {norm:.6g}; normalise it",
            value,
        )
    w, x, y, z = w / norm, x / norm, y / norm, z / norm
    rotation = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    return _frozen(rotation)


def _is_scalar(item: object) -> bool:
    return isinstance(item, int | float | np.number)


def _as_float_array(item: object, value: object) -> NDArray[np.float64]:
    if isinstance(item, np.ndarray) and item.dtype == np.float64:
        return item
    try:
        return np.asarray(item, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidTarget(f"not numeric ({exc})", value) from None


def _finite(array: NDArray[np.float64], value: object) -> NDArray[np.float64]:
    if not np.isfinite(array).all():
        raise InvalidTarget("NaN or infinite values", value)
    return _frozen(array)


def _frozen(array: NDArray[np.float64]) -> NDArray[np.float64]:
    out = array.copy()  # never freeze or alias the caller's array
    out.flags.writeable = False
    return out
