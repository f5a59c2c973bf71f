"""FK + Jacobian of one chain for a batch, with the exact arithmetic of the single-call kernel.

``Chain.fk_jacobian`` runs generated straight-line float code. ``ArrayKernel``
runs the same generated lines with each variable a (B,) array instead of a float:
the same operations in the same order, so every world's pose and Jacobian are
bit for bit those of ``Chain.fk_jacobian`` (IEEE arithmetic is elementwise, and
numpy's ``cos``/``sin`` are checked against ``math``'s at construction).

Bitwise equality matters for ``QPBatchSolver``'s promise that each world's answer
equals ``QPSolver``'s: on a redundant arm the QP's damping is ~1e-9, so a
last-bit difference in the Jacobian can grow to ~1e-9 in the result. Where the
check fails (another numpy build, a floating joint), ``kernel_for`` falls back to
the vectorised ``BatchKernel``, equal to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.codegen.batch_kernel import BatchKernel

Array = NDArray[np.float64]
Kernel = Callable[[Array], tuple[Array, Array]]
_PACK = "    b = _bytearray(_pack("


class ArrayKernel:
    """The chain's generated FK + Jacobian lines evaluated on (B,) arrays.

    Raises:
        ValueError: the generated source is not of the expected form (then use
            ``BatchKernel``).
    """

    def __init__(self, chain: Any) -> None:
        self.dof = int(chain.dof)
        chain.fk_jacobian(np.zeros(self.dof))  # generates the single-call kernel
        source = chain._kernel_fj.__source__
        lines = source.splitlines()
        if "_rotvec" in source or not lines[1].endswith("= q.tolist()"):
            raise ValueError("not a chain of scalar joints")
        packs = [line for line in lines if line.startswith(_PACK)]
        if len(packs) != 1:
            raise ValueError("unexpected kernel source")
        body = [lines[0], lines[1].replace("q.tolist()", "q")]
        body += [line for line in lines[2:] if not line.startswith(("    b = ", "    return "))]
        body.append(f"    return [{packs[0][len(_PACK) : -2]}]")
        namespace: dict[str, Any] = {"_cos": np.cos, "_sin": np.sin}
        # The source is the chain's own generated kernel: numbers and generated names only.
        exec(compile("\n".join(body) + "\n", "<hilbot ik array kernel>", "exec"), namespace)
        self._f: Callable[[Array], list[Array | float]] = namespace["chain_kernel"]

    def __call__(self, q: Array) -> tuple[Array, Array]:
        """Poses (B, 3, 4) and Jacobians (B, 6, dof) at ``q`` (B, dof)."""
        size = q.shape[0]
        values = self._f(np.ascontiguousarray(q.T))
        out = np.empty((len(values), size))
        for i, value in enumerate(values):
            out[i] = value
        pose = out[:12].T.reshape(size, 3, 4)
        jac = out[16:].T.reshape(size, 6, self.dof)
        return pose, jac


_CACHE: dict[int, tuple[Any, Kernel]] = {}


def kernel_for(chain: Any) -> Kernel:
    """``ArrayKernel`` if it reproduces ``Chain.fk_jacobian`` bit for bit, else ``BatchKernel``.

    Built once per chain (``Robot.path_between`` memoises chains) and cached.
    """
    cached = _CACHE.get(id(chain))
    if cached is not None and cached[0] is chain:
        return cached[1]
    kernel = _build(chain)
    _CACHE[id(chain)] = (chain, kernel)
    return kernel


_FAST: dict[int, tuple[Any, Kernel]] = {}


def fast_kernel_for(chain: Any) -> Kernel:
    """The vectorised ``BatchKernel``, cached per chain: about half the time.

    Equal to ``Chain.fk_jacobian`` to rounding, for callers that need no bitwise equality.
    """
    cached = _FAST.get(id(chain))
    if cached is None or cached[0] is not chain:
        cached = _FAST[id(chain)] = (chain, _wrap(BatchKernel(chain)))
    return cached[1]


def _build(chain: Any) -> Kernel:
    try:
        kernel = ArrayKernel(chain)
    except ValueError:
        return _wrap(BatchKernel(chain))
    rng = np.random.default_rng(0)
    q = rng.uniform(-math.pi, math.pi, (8, kernel.dof))
    pose, jac = kernel(q)
    for b in range(q.shape[0]):
        p, j = chain.fk_jacobian(q[b])
        if not (np.array_equal(p[:3], pose[b]) and np.array_equal(j, jac[b])):
            return _wrap(BatchKernel(chain))
    return kernel


def _wrap(kernel: BatchKernel) -> Kernel:
    def call(q: Array) -> tuple[Array, Array]:
        pose, jac = kernel(q)
        return pose.T.reshape(-1, 3, 4), jac.transpose(2, 0, 1)

    return call


__all__ = ["ArrayKernel", "fast_kernel_for", "kernel_for"]
