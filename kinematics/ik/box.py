"""The per-call box on a chain's flat configuration."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray


class Box(NamedTuple):
    """Per-call bounds on the flat configuration, (dof,) each, ``±inf`` where unbounded.

    It is the joint limits (when respected) intersected with ``q0 ± max_delta``.
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
