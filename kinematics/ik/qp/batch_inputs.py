"""Inputs of a batched QP solve: B targets, B seeds and B call boxes, validated at the door."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.errors import InvalidTarget
from hilbot.kinematics.ik.core.target import OrientationKind, parse_target
from hilbot.kinematics.ik.qp.batch_rows import Targets

Array = NDArray[np.float64]


def parse_targets(targets: Any) -> Targets:
    """B targets of one kind from (B, 3) points, (B, 4, 4) transforms or a sequence of targets.

    Raises:
        InvalidTarget: a value is not finite, a transform is not rigid, the shape is
            not one of those, or the sequence mixes kinds of target.
        ValueError: the batch is empty.
    """
    if isinstance(targets, np.ndarray) and targets.ndim in (2, 3):
        array = np.asarray(targets, dtype=np.float64)
        if not array.shape[0]:
            raise ValueError("the batch is empty")
        if not np.isfinite(array).all():
            raise InvalidTarget("NaN or infinite values in the batch", "targets")
        if array.shape[1:] == (3,):
            return Targets(OrientationKind.NONE, array.copy(), None)
        if array.shape[1:] == (4, 4):
            rotation = array[:, :3, :3]
            gram = rotation.transpose(0, 2, 1) @ rotation
            bad = np.abs(gram - np.eye(3)).max(axis=(1, 2)) > 1e-5
            bad |= np.linalg.det(rotation) < 0.0
            bad |= (array[:, 3] != (0.0, 0.0, 0.0, 1.0)).any(axis=1)
            if bad.any():
                raise InvalidTarget(
                    f"transform {int(np.argmax(bad))} is not rigid (rotation not proper, or "
                    "last row not 0 0 0 1)",
                    "targets",
                )
            return Targets(OrientationKind.FULL, array[:, :3, 3].copy(), rotation.copy())
        raise InvalidTarget(f"unsupported batch shape {array.shape}", "targets")
    parsed = [parse_target(t) for t in targets]
    if not parsed:
        raise ValueError("the batch is empty")
    kinds = {t.kind for t in parsed}
    if len(kinds) != 1:
        names = sorted(k.value for k in kinds)
        raise InvalidTarget(f"a batch must hold one kind of target, got {names}", "targets")
    kind = parsed[0].kind
    point = np.array([t.point for t in parsed])
    if kind is OrientationKind.NONE:
        return Targets(kind, point, None)
    orientation = np.array([t.orientation for t in parsed])
    if kind is OrientationKind.FULL:
        orientation = orientation.reshape(-1, 3, 3)
    return Targets(kind, point, orientation)


def seeds(info: ChainInfo, initial: Any, size: int) -> tuple[Array, list[Any] | None]:
    """(B, dof) seeds and, for states or mappings, the base of each world's positions.

    Raises:
        ValueError: a shape or count that does not match, or a seed that is not finite.
    """
    if isinstance(initial, np.ndarray):
        q0 = np.asarray(initial, dtype=np.float64)
        if q0.shape == (info.dof,):
            q0 = np.broadcast_to(q0, (size, info.dof))
        if q0.shape != (size, info.dof):
            raise ValueError(f"seeds must have shape ({size}, {info.dof}), got {q0.shape}")
        if not np.isfinite(q0).all():
            raise ValueError("seeds must be finite")
        return q0.copy(), None
    rows = [info.read(item) for item in initial]
    if len(rows) != size:
        raise ValueError(f"{len(rows)} seeds for {size} targets")
    return np.array([q for q, _ in rows]), [base for _, base in rows]


def boxes(
    info: ChainInfo, q0: Array, respect_limits: bool, max_delta: float | None
) -> tuple[Array, Array]:
    """Per-world call boxes (B, dof) each, as ``ChainInfo.box`` builds one."""
    size = q0.shape[0]
    lower = info.lower if respect_limits else np.full(info.dof, -np.inf)
    upper = info.upper if respect_limits else np.full(info.dof, np.inf)
    if max_delta is None:
        return np.tile(lower, (size, 1)), np.tile(upper, (size, 1))
    lo, hi = q0 - max_delta, q0 + max_delta
    if respect_limits:
        lo = np.minimum(np.maximum(lo, lower), q0)
        hi = np.maximum(np.minimum(hi, upper), q0)
    return lo, hi


__all__ = ["boxes", "parse_targets", "seeds"]
