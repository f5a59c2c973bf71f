"""IK targets: every accepted form parsed once into a small frozen value.

Accepted forms (all in the source link's frame, metres):

- a position ``(3,)``;
- ``(position, None)``: position only;
- ``(position, axis (3,))``: the target link's z-axis points along ``axis``
  (any non-zero length; it is normalised);
- ``(position, quaternion (4,))`` as ``(w, x, y, z)``, unit length within
  ``QUATERNION_TOLERANCE`` (1e-3), then normalised;
- ``(position, rotation (3, 3))``, orthonormal with determinant +1 within
  ``ROTATION_TOLERANCE`` (1e-5), used as given;
- a 4x4 homogeneous transform (last row ``0 0 0 1``).

Anything else, any NaN or infinite value, a tool axis shorter than
``MIN_DIRECTION_NORM`` or a position coordinate beyond ``MAX_COORDINATE`` (1e9 m)
raises ``InvalidTarget``. The tolerances live in :mod:`hilbot.kinematics.tolerances`:
they are the only ones a pose target is judged by. The
parsed value keeps plain floats (the solvers' hot loops read those) and builds
numpy views on request.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.errors import InvalidTarget
from hilbot.kinematics.tolerances import (
    MAX_COORDINATE,
    MIN_DIRECTION_NORM,
    QUATERNION_TOLERANCE,
    ROTATION_TOLERANCE,
)


class OrientationKind(enum.Enum):
    """What a target asks of the target link's orientation."""

    NONE = "none"
    AXIS = "axis"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed IK target; build with ``parse_target``.

    Attributes:
        point: the target position in the source frame [m], as 3 floats.
        kind: what the orientation part asks for.
        orientation: 9 floats (rotation, row-major) for ``FULL``, 3 floats (unit
            z-axis direction) for ``AXIS``, empty for ``NONE``.
    """

    point: tuple[float, float, float]
    kind: OrientationKind = OrientationKind.NONE
    orientation: tuple[float, ...] = ()

    @property
    def rows(self) -> int:
        """Task rows: 3 for a position, 6 with an orientation or a tool axis."""
        return 3 if self.kind is OrientationKind.NONE else 6

    @property
    def position(self) -> NDArray[np.float64]:
        """(3,) target position [m]."""
        return np.array(self.point)

    @property
    def rotation(self) -> NDArray[np.float64] | None:
        """(3, 3) target rotation for ``FULL`` targets, else ``None``."""
        if self.kind is not OrientationKind.FULL:
            return None
        return np.array(self.orientation).reshape(3, 3)

    @property
    def axis(self) -> NDArray[np.float64] | None:
        """(3,) unit direction of the target link's z-axis for ``AXIS`` targets, else ``None``."""
        if self.kind is not OrientationKind.AXIS:
            return None
        return np.array(self.orientation)

    def transform(self) -> NDArray[np.float64]:
        """The target as a 4x4 transform (identity rotation unless ``FULL``)."""
        out = np.eye(4)
        out[:3, 3] = self.point
        rotation = self.rotation
        if rotation is not None:
            out[:3, :3] = rotation
        return out


# The slot descriptors of ``Target``: the hot path fills a new instance through them.
_new = object.__new__
_set_point = vars(Target)["point"].__set__
_set_kind = vars(Target)["kind"].__set__
_set_orientation = vars(Target)["orientation"].__set__
_FULL = OrientationKind.FULL


def parse_target(value: object) -> Target:
    """Parse any accepted target form into a ``Target``.

    Args:
        value: a ``Target``, a position, a ``(position, orientation)`` pair or a 4x4 transform.

    Returns:
        The parsed target.

    Raises:
        InvalidTarget: on a wrong shape, NaN or infinite values, a zero axis, a
            non-unit quaternion or a matrix that is not a proper rotation.
    """
    kind = type(value)
    if kind is np.ndarray and value.shape == (4, 4) and value.dtype == np.float64:  # type: ignore[attr-defined]
        return _parse_transform(value.tolist(), value)  # type: ignore[attr-defined]  # hot path
    if isinstance(value, Target):
        return value
    if isinstance(value, tuple | list) and len(value) == 2 and not _is_scalar(value[0]):
        return _parse_pair(value[0], value[1], value)
    array = _as_float_array(value, value)
    if array.shape == (4, 4):
        return _parse_transform(array.tolist(), value)
    if array.shape == (3,):
        return Target(_point(array, value))
    raise InvalidTarget(f"unsupported shape {array.shape}", value)


def _parse_pair(position: object, orientation: object, value: object) -> Target:
    pos = _as_float_array(position, value)
    if pos.shape != (3,):
        raise InvalidTarget(f"position must have shape (3,), got {pos.shape}", value)
    point = _point(pos, value)
    if orientation is None:
        return Target(point)
    ori = _as_float_array(orientation, value)
    flat = ori.reshape(-1).tolist()
    if not all(map(math.isfinite, flat)):
        raise InvalidTarget("NaN or infinite values", value)
    if ori.shape == (3,):
        return Target(point, OrientationKind.AXIS, _unit_axis(flat, value))
    if ori.shape == (4,):
        return Target(point, OrientationKind.FULL, _quaternion_to_rotation(flat, value))
    if ori.shape == (3, 3):
        _check_rotation_rows((flat[0:3], flat[3:6], flat[6:9]), value)
        return Target(point, OrientationKind.FULL, tuple(flat))
    raise InvalidTarget(
        f"orientation must be None, an axis (3,), a quaternion (4,) or a rotation (3, 3), "
        f"got shape {ori.shape}",
        value,
    )


def _parse_transform(rows: list[list[float]], value: object) -> Target:
    (a, b, c, x), (d, e, f, y), (g, h, i, z), (r30, r31, r32, r33) = rows
    # A sum is finite only if every term is (NaN and inf propagate); 1e300-sized
    # entries may overflow it, which rejects them too, rightly.
    if not math.isfinite(a + b + c + x + d + e + f + y + g + h + i + z + r30 + r31 + r32 + r33):
        raise InvalidTarget(
            _not_finite(a, b, c, x, d, e, f, y, g, h, i, z, r30, r31, r32, r33), value
        )
    top = MAX_COORDINATE
    if not (-top <= x <= top and -top <= y <= top and -top <= z <= top):
        _point_in_range(x, y, z, value)  # raises
    if abs(r30) + abs(r31) + abs(r32) + abs(r33 - 1.0) > 1e-9:
        raise InvalidTarget("the last row of a 4x4 transform must be [0, 0, 0, 1]", value)
    # ``_check_rotation`` inlined for the hot path: chained comparisons, no call.
    tol = ROTATION_TOLERANCE
    if not (
        -tol <= a * a + d * d + g * g - 1.0 <= tol
        and -tol <= b * b + e * e + h * h - 1.0 <= tol
        and -tol <= c * c + f * f + i * i - 1.0 <= tol
        and -tol <= a * b + d * e + g * h <= tol
        and -tol <= a * c + d * f + g * i <= tol
        and -tol <= b * c + e * f + h * i <= tol
        and a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g) >= 0.0
    ):
        _check_rotation(a, b, c, d, e, f, g, h, i, value)  # raises with the reason
    # ``Target(...)`` without the frozen dataclass's ``__init__`` (the same three slots).
    out = _new(Target)
    _set_point(out, (x, y, z))
    _set_kind(out, _FULL)
    _set_orientation(out, (a, b, c, d, e, f, g, h, i))
    return out


def _check_rotation_rows(rows: Sequence[Sequence[float]], value: object) -> None:
    """Reject a matrix that is not orthonormal with determinant +1 (scalar math: 3x3 is tiny)."""
    (a, b, c, *_), (d, e, f, *_), (g, h, i, *_) = rows
    _check_rotation(a, b, c, d, e, f, g, h, i, value)


def _check_rotation(
    a: float,
    b: float,
    c: float,
    d: float,
    e: float,
    f: float,
    g: float,
    h: float,
    i: float,
    value: object,
) -> None:
    """``_check_rotation_rows`` on the nine entries (row-major)."""
    tol = ROTATION_TOLERANCE
    deviations = (
        a * a + d * d + g * g - 1.0,
        b * b + e * e + h * h - 1.0,
        c * c + f * f + i * i - 1.0,
        a * b + d * e + g * h,
        a * c + d * f + g * i,
        b * c + e * f + h * i,
    )
    u0, u1, u2, u3, u4, u5 = deviations
    # Chained comparisons are cheaper than abs() and max() on the valid (hot) path.
    if not (
        -tol <= u0 <= tol
        and -tol <= u1 <= tol
        and -tol <= u2 <= tol
        and -tol <= u3 <= tol
        and -tol <= u4 <= tol
        and -tol <= u5 <= tol
    ):
        error = max(map(abs, deviations))
        raise InvalidTarget(f"the rotation is not orthonormal (|R^T R - I| = {error:.3g})", value)
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    if det < 0.0:
        raise InvalidTarget("the rotation is a reflection (determinant -1)", value)


def _unit_axis(axis: list[float], value: object) -> tuple[float, ...]:
    """``axis`` normalised; any finite length works (``math.hypot`` cannot overflow it)."""
    norm = math.hypot(*axis)
    if norm < MIN_DIRECTION_NORM:
        raise InvalidTarget(f"the tool axis has (almost) zero length ({norm:.3g})", value)
    if norm == math.inf:  # beyond the largest float: shrink it first (exactly, by a power of 2)
        axis = [math.ldexp(v, -64) for v in axis]
        norm = math.hypot(*axis)
    return tuple(v / norm for v in axis)


def _quaternion_to_rotation(quat: list[float], value: object) -> tuple[float, ...]:
    w, x, y, z = quat
    norm = math.hypot(w, x, y, z)  # a huge quaternion is reported with its norm, not inf
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        raise InvalidTarget(
            f"the quaternion (w, x, y, z) must have unit norm, got {norm:.6g}; normalise it",
            value,
        )
    w, x, y, z = w / norm, x / norm, y / norm, z / norm
    return (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip


def _is_scalar(item: object) -> bool:
    return isinstance(item, int | float | np.number)


def _as_float_array(item: object, value: object) -> NDArray[np.float64]:
    if isinstance(item, np.ndarray) and item.dtype == np.float64:
        return item
    try:
        return np.asarray(item, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidTarget(f"not numeric ({exc})", value) from None


def _point(array: NDArray[np.float64], value: object) -> tuple[float, float, float]:
    x, y, z = array.tolist()
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        raise InvalidTarget("NaN or infinite values", value)
    _point_in_range(x, y, z, value)
    return (x, y, z)


def _point_in_range(x: float, y: float, z: float, value: object) -> None:
    """Reject a finite position coordinate beyond ``MAX_COORDINATE``."""
    biggest = max(abs(x), abs(y), abs(z))
    if biggest > MAX_COORDINATE:
        raise InvalidTarget(
            f"a position coordinate is {biggest:.3g} m; targets must lie within "
            f"±{MAX_COORDINATE:.0e} m of the source link",
            value,
        )


def _not_finite(*entries: float) -> str:
    """Why a sum of finite-looking entries is not finite: NaN/inf, or too large to add."""
    if all(map(math.isfinite, entries)):
        return f"values too large (up to {max(map(abs, entries)):.3g}) to be a pose"
    return "NaN or infinite values"
