"""The results of a batched solve: the status codes and one ``Solution`` per item."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.chain_info import ChainInfo
from hilbot.kinematics.ik.core.solution import Solution, Status

Array = NDArray[np.float64]

# The (B,) int status codes of the batch solvers are indices into this tuple.
STATUSES = (Status.CONVERGED, Status.STALLED, Status.DIVERGED, Status.TIMEOUT)


def batch_solutions(
    info: ChainInfo,
    q: Array,
    iterations: NDArray[np.int64],
    residual: Array,
    orientation: Array | None,
    reached: NDArray[np.bool_],
    status: NDArray[np.integer[Any]],
    position_reached: NDArray[np.bool_],
    bases: list[Any] | None,
) -> list[Solution]:
    """One ``Solution`` per item of (B, ...) result arrays.

    Args:
        info: the chain's ``ChainInfo`` (its ``to_dict`` builds ``positions``).
        q: (B, dof) configurations.
        iterations: (B,) iterations run.
        residual: (B,) position residuals [m].
        orientation: (B,) orientation residuals [rad], or ``None`` for position-only
            targets (each ``Solution`` then has ``orientation_residual=None``).
        reached: (B,) the whole target met.
        status: (B,) codes, indices into ``STATUSES``.
        position_reached: (B,) the position met.
        bases: each item's positions outside the chain (seeds given as states or
            mappings), or ``None`` for array seeds.
    """
    return [
        Solution(
            q[b],
            int(iterations[b]),
            float(residual[b]),
            None if orientation is None else float(orientation[b]),
            bool(reached[b]),
            STATUSES[status[b]],
            bases[b] if bases is not None else {},
            info.to_dict,
            bool(position_reached[b]),
        )
        for b in range(q.shape[0])
    ]


__all__ = ["STATUSES", "batch_solutions"]
