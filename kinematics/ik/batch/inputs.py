"""The inputs of a batched solve, validated at the door: B targets, B seeds and B call boxes.

One validator for every batch solver (``BatchSolver``, ``QPBatchSolver``, ``solve_ik``'s
frame targets): the same input is accepted or refused, with the same message, whichever
solver it is given to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.box import delta_bounds
from hilbot.kinematics.ik.core.chain_info import ChainInfo, check_positions
from hilbot.kinematics.ik.core.errors import InvalidTarget
from hilbot.kinematics.ik.core.target import OrientationKind, Target, parse_target
from hilbot.kinematics.tolerances import MAX_COORDINATE, ROTATION_TOLERANCE

Array = NDArray[np.float64]

_STACKED_MAX = 48  # up to this batch size the stacked 3x3 products are the cheaper check


class BatchTargets(NamedTuple):
    """B targets of one kind: points (B, 3), rotations (B, 3, 3) or axes (B, 3), or None."""

    kind: OrientationKind
    point: Array
    orientation: Array | None


class BatchCall(NamedTuple):
    """A batched call's checked inputs: its targets, (B, dof) seeds inside their boxes, bases."""

    targets: BatchTargets
    q0: Array
    bases: list[Any] | None
    lo: Array
    hi: Array


def batch_call(
    info: ChainInfo,
    initial: Any,
    targets: Any,
    respect_limits: bool,
    max_delta: float | None,
) -> BatchCall:
    """Parse the targets, read the seeds, build the boxes and move each seed into its box.

    Raises:
        InvalidTarget: as ``parse_targets``.
        InvalidPositions: as ``seeds``.
        ValueError: as ``parse_targets`` and ``seeds``.
    """
    parsed = parse_targets(targets)
    q0, bases = seeds(info, initial, parsed.point.shape[0])
    lo, hi = boxes(info, q0, respect_limits, max_delta)
    return BatchCall(parsed, np.minimum(np.maximum(q0, lo), hi), bases, lo, hi)


def parse_targets(targets: Any) -> BatchTargets:
    """B targets of one kind from (B, 3) points, (B, 4, 4) transforms or a sequence of targets.

    Raises:
        InvalidTarget: a value is not finite, a position coordinate is beyond
            ``MAX_COORDINATE``, a transform is not rigid, the shape is not one of
            those, or the sequence mixes kinds of target.
        ValueError: the batch is empty.
    """
    if isinstance(targets, np.ndarray) and targets.ndim in (2, 3):
        return _parse_array(np.asarray(targets, dtype=np.float64))
    parsed = [parse_target(t) for t in targets]
    if not parsed:
        raise ValueError("the batch is empty")
    kinds = {t.kind for t in parsed}
    if len(kinds) != 1:
        names = sorted(k.value for k in kinds)
        raise InvalidTarget(f"a batch must hold one kind of target, got {names}", "targets")
    kind = parsed[0].kind
    orientation = None if kind is OrientationKind.NONE else orientation_array(parsed)
    return BatchTargets(kind, np.array([t.point for t in parsed]), orientation)


def _parse_array(array: Array) -> BatchTargets:
    if not array.shape[0]:
        raise ValueError("the batch is empty")
    if not np.isfinite(array).all():
        raise InvalidTarget("NaN or infinite values in the batch", "targets")
    if array.shape[1:] == (3,):
        points = array
    elif array.shape[1:] == (4, 4):
        points = array[:, :3, 3]
    else:
        raise InvalidTarget(f"unsupported batch shape {array.shape}", "targets")
    if float(np.abs(points).max()) > MAX_COORDINATE:
        raise InvalidTarget(
            f"a position coordinate beyond ±{MAX_COORDINATE:.0e} m in the batch", "targets"
        )
    if array.ndim == 2:
        return BatchTargets(OrientationKind.NONE, array.copy(), None)
    rotation = array[:, :3, :3]
    error, det = _orthogonality(rotation)
    bad = (error > ROTATION_TOLERANCE) | (det < 0.0)
    bad |= (array[:, 3] != (0.0, 0.0, 0.0, 1.0)).any(axis=1)
    if bad.any():
        raise InvalidTarget(
            f"transform {int(np.argmax(bad))} is not rigid (rotation not proper, or "
            "last row not 0 0 0 1)",
            "targets",
        )
    return BatchTargets(OrientationKind.FULL, points.copy(), rotation.copy())


def _orthogonality(rotation: Array) -> tuple[Array, Array]:
    """Each rotation's ``max |RᵀR - I|`` and determinant, (B,) each.

    Small batches take the stacked 3x3 products; larger ones work on (B,) rows of
    columns, where the stacked products cost several times more.
    """
    if rotation.shape[0] <= _STACKED_MAX:
        gram = rotation.transpose(0, 2, 1) @ rotation
        return np.abs(gram - np.eye(3)).max(axis=(1, 2)), np.linalg.det(rotation)
    r = np.ascontiguousarray(rotation.reshape(-1, 9).T)  # r[3 k + i] = R_ki
    x, y, z = r[0::3], r[1::3], r[2::3]  # the columns, (3, B) each
    error = np.zeros(r.shape[1])
    for i, a in enumerate((x, y, z)):
        for j, b in enumerate((x, y, z)[: i + 1]):
            gram = np.einsum("kb,kb->b", a, b)
            np.maximum(error, np.abs(gram - 1.0 if i == j else gram), out=error)
    det = (
        (x[1] * y[2] - x[2] * y[1]) * z[0]
        + (x[2] * y[0] - x[0] * y[2]) * z[1]
        + (x[0] * y[1] - x[1] * y[0]) * z[2]
    )
    return error, det


def orientation_array(parsed: Sequence[Target]) -> Array:
    """The (B, 3, 3) rotations or (B, 3) axes of parsed targets of one kind (not ``NONE``)."""
    if parsed[0].kind is OrientationKind.FULL:
        return np.array([t.orientation for t in parsed]).reshape(-1, 3, 3)
    return np.array([t.orientation for t in parsed])


def seeds(info: ChainInfo, initial: Any, size: int) -> tuple[Array, list[Any] | None]:
    """(B, dof) seeds and, for states or mappings, the base of each item's positions.

    ``initial`` is a (B, dof) array, one (dof,) seed for all, or a sequence of ``B``
    states, mappings or flat arrays.

    Raises:
        ValueError: a shape or count that does not match.
        InvalidPositions: a seed coordinate that is not finite or not sane.
    """
    if isinstance(initial, np.ndarray):
        q0 = np.asarray(initial, dtype=np.float64)
        if q0.shape == (info.dof,):
            q0 = np.broadcast_to(q0, (size, info.dof))
        if q0.shape != (size, info.dof):
            raise ValueError(f"seeds must have shape ({size}, {info.dof}), got {q0.shape}")
        check_positions(q0, info.names)
        return q0.copy(), None
    rows = [info.read(item) for item in initial]
    if len(rows) != size:
        raise ValueError(f"{len(rows)} seeds for {size} targets")
    return np.array([q for q, _ in rows]), [base for _, base in rows]


def boxes(
    info: ChainInfo,
    q0: Array,
    respect_limits: bool,
    max_delta: float | None,
) -> tuple[Array, Array]:
    """Per-item call boxes (B, dof) each, as ``ChainInfo.box`` builds one.

    Without ``max_delta`` every item has the same box: read-only rows broadcast from
    the limits (stride 0, which a solver may use to skip per-item gathers); a solver
    that changes a box works on its own copy.
    """
    lower = info.lower if respect_limits else np.full(info.dof, -np.inf)
    upper = info.upper if respect_limits else np.full(info.dof, np.inf)
    if max_delta is None:
        return np.broadcast_to(lower, q0.shape), np.broadcast_to(upper, q0.shape)
    return delta_bounds(q0, max_delta, (lower, upper) if respect_limits else None)


__all__ = [
    "BatchCall",
    "BatchTargets",
    "batch_call",
    "boxes",
    "orientation_array",
    "parse_targets",
    "seeds",
]
