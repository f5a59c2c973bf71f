"""FK + Jacobian of a scalar serial chain over a batch, generated as straight-line numpy code.

The chain is folded into ``T(q) = F_0 M_0(q) F_1 M_1(q) ... F_n`` (constant ``F_k``;
each ``M_k`` rotates about, or translates along, z), as ``scalar_kernel.ScalarKernel`` does,
and written out once as Python source whose variables are (B,) arrays: the batch is
the last, contiguous axis. Results go straight into (12, B) and (6, dof, B) buffers
(structure of arrays), which is the layout the batched step wants, so no strided
scatter into (B, 4, 4) and (B, 6, dof) arrays is needed. Constants are folded while
generating and zero terms dropped. The source holds only numbers from the URDF
formatted with ``repr``.

Results equal ``Chain.fk_jacobian`` to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.codegen.emit import Emitter, Value
from hilbot.kinematics.codegen.scalar_kernel import Step, emit_jacobian, emit_pose, fold_chain

Array = NDArray[np.float64]
_EPS = 1e-15
_FLOATS_MAX = 16  # up to this many items, evaluate on Python floats item by item


class BatchKernel:
    """Compiled batched FK + Jacobian of a scalar serial chain (see the module docstring)."""

    def __init__(self, chain: Any) -> None:
        self.dof = int(chain.dof)
        steps, tip = fold_chain(chain)
        # One plain revolute joint per column: the linear rows are one vectorised cross
        # product of the axes with (tip - origin) instead of straight-line code per joint.
        motions = [(col, mult, offset, prismatic) for _, prismatic, col, mult, offset in steps]
        self.crossed = motions == [(c, 1.0, 0.0, False) for c in range(self.dof)]
        self.source = _generate(steps, tip, self.dof, crossed=self.crossed)
        namespace: dict[str, Any] = {"_negative": np.negative}
        exec(compile(self.source, "<hilbot ik batch kernel>", "exec"), namespace)  # numbers only
        self._f: Callable[..., None] = namespace["f"]
        scalar = _generate(steps, tip, self.dof, crossed=False, scalar=True)
        exec(compile(scalar, "<hilbot ik batch kernel, floats>", "exec"), namespace)
        self._g: Callable[..., list[float]] = namespace["g"]

    def __call__(self, q: Array) -> tuple[Array, Array]:
        """Poses (12, B) (top 3x4 blocks, row-major) and Jacobians (6, dof, B) at ``q`` (B, dof)."""
        batch = q.shape[0]
        if batch <= _FLOATS_MAX:  # a few items: Python floats beat numpy's per-call overhead
            g, cos, sin = self._g, math.cos, math.sin
            out = np.array([g(row, cos, sin) for row in q.tolist()]).T  # (12 + 6 dof, B)
            return np.ascontiguousarray(out[:12]), out[12:].reshape(6, self.dof, batch)
        pose = np.empty((12, batch))
        jac = np.empty((6, self.dof, batch))
        origin = np.empty((3, self.dof, batch)) if self.crossed else None
        self._f(list(np.ascontiguousarray(q.T)), np.cos, np.sin, pose, jac, origin)
        if origin is not None:  # linear rows: z x (tip - origin), as the scalar code writes it
            d = pose[3::4, None, :] - origin
            z = jac[3:]
            for i in range(3):
                j, k = (i + 1) % 3, (i + 2) % 3
                np.multiply(z[j], d[k], out=jac[i])
                jac[i] -= z[k] * d[j]
        return pose, jac


def _generate(
    steps: list[Step], tip: Array, dof: int, *, crossed: bool, scalar: bool = False
) -> str:
    """Source of ``f(q, cos, sin, pose, jac, origin)`` filling (12, B) and (6, dof, B) buffers.

    With ``crossed``, only the angular rows of ``jac`` are written, and each joint's
    origin goes to column ``k`` of the (3, dof, B) ``origin`` buffer instead. With
    ``scalar``, the source is of ``g(q, cos, sin)`` on floats, returning the 12 pose
    entries and then the Jacobian row by row as one list.
    """
    em = Emitter()
    pose, axes = emit_pose(em, steps, tip)
    tip_position = [pose[3], pose[7], pose[11]]
    if scalar:
        columns = emit_jacobian(em, axes, tip_position, dof)
        values = [*pose, *(columns[col][row] for row in range(6) for col in range(dof))]
        listing = ", ".join(repr(v) if isinstance(v, float) else v for v in values)
        return "def g(q, cos, sin):\n" + "\n".join([*em.lines, f"    return [{listing}]"]) + "\n"
    out = [_store(f"pose[{k}]", v) for k, v in enumerate(pose)]
    if crossed:
        for _, col, _, z, origin in axes:
            out += [_store(f"jac[{3 + i}, {col}]", z[i]) for i in range(3)]
            out += [_store(f"origin[{i}, {col}]", origin[i]) for i in range(3)]
    else:
        columns = emit_jacobian(em, axes, tip_position, dof)
        out += [
            _store(f"jac[{row}, {col}]", v)
            for col, column in enumerate(columns)
            for row, v in enumerate(column)
        ]
    return "def f(q, cos, sin, pose, jac, origin):\n" + "\n".join([*em.lines, *out]) + "\n"


def _store(target: str, value: Value) -> str:
    """A line writing ``value`` to the buffer row ``target`` (a negated name negates)."""
    if isinstance(value, float):
        return f"    {target} = {value!r}"
    if value.startswith("-"):
        return f"    _negative({value[1:]}, out={target})"
    return f"    {target} = {value}"
