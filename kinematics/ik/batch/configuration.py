"""``Configuration``: a chain and its joint positions, for one world or for B worlds at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from hilbot.kinematics.ik.core.chain_info import ChainInfo, check_positions
from hilbot.kinematics.ik.qp.limits.limit import check_positive

Array = NDArray[np.float64]


class Configuration:
    """The state ``solve_ik`` differentiates: a ``Chain`` and its flat configuration(s).

    Args:
        chain: the chain (``robot.path_between(source, target)``); targets are
            expressed in its source frame.
        q: (dof,) one world, or (B, dof) B worlds, in ``Chain.jacobian_columns``
            order; ``None``: every joint at 0 clipped into its limits (one world).

    Raises:
        ValueError: ``q`` has the wrong shape, is not finite or beyond ``MAX_POSITION``
            (``InvalidPositions``), or the chain has no movable joint.

    Attributes:
        chain: the chain.
        q: (dof,) or (B, dof) configuration (a copy; ``integrate`` returns a new one).
        batched: whether ``q`` holds B worlds.
    """

    def __init__(
        self, chain: Any, q: npt.ArrayLike | None = None, *, _info: ChainInfo | None = None
    ) -> None:
        self.chain = chain
        self.info = ChainInfo(chain) if _info is None or _info.chain is not chain else _info
        # The bounds that held in the last solve_ik step from this configuration's parent:
        # the next step's active sets start from them (a guess; never a constraint).
        self.held: tuple[NDArray[np.bool_], NDArray[np.bool_]] | None = None
        dof = self.info.dof
        if dof == 0:
            raise ValueError(f"{chain!r} has no movable joint")
        if q is None:
            q = np.clip(np.zeros(dof), self.info.lower, self.info.upper)
        array = np.array(q, dtype=np.float64)
        if array.ndim not in (1, 2) or array.shape[-1] != dof:
            raise ValueError(f"q must have shape ({dof},) or (B, {dof}), got {array.shape}")
        if not array.size or not np.isfinite(array).all():
            raise ValueError("q must be finite and not empty")
        check_positions(array, self.info.names)  # finite but absurd (beyond 1e9 rad or m)
        self.q = array
        self.batched = array.ndim == 2

    @property
    def worlds(self) -> Array:
        """``q`` as (B, dof) (one row for a single world)."""
        return self.q if self.batched else self.q[None]

    def integrate(self, velocity: npt.ArrayLike, dt: float) -> Configuration:
        """The configuration after moving at ``velocity`` [rad/s or m/s] for ``dt`` [s].

        Raises:
            ValueError: ``velocity`` does not have ``q``'s shape or is not finite, ``dt``
                is not finite and positive, or the result is beyond ``MAX_POSITION``.
        """
        dt = check_positive("dt", dt)
        v = np.asarray(velocity, dtype=np.float64)
        if v.shape != self.q.shape or not np.isfinite(v).all():
            raise ValueError(f"velocity must be finite with shape {self.q.shape}, got {v.shape}")
        if self.info.scalar:
            moved = self.q + v * dt
        else:
            steps = v.reshape(-1, v.shape[-1]) * dt
            rows = [self.chain.integrate(q, dq) for q, dq in zip(self.worlds, steps, strict=True)]
            moved = np.array(rows) if self.batched else np.array(rows[0])
        out = Configuration(self.chain, moved, _info=self.info)
        out.held = self.held
        return out

    def __repr__(self) -> str:
        shape = f"{self.q.shape[0]} worlds" if self.batched else "1 world"
        return f"Configuration({self.chain!r}, {shape})"


__all__ = ["Configuration"]
