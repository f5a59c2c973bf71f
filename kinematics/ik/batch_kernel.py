"""FK + Jacobian of a scalar serial chain over a batch, generated as straight-line numpy code.

The chain is folded into ``T(q) = F_0 M_0(q) F_1 M_1(q) ... F_n`` (constant ``F_k``;
each ``M_k`` rotates about, or translates along, z), as ``kernel.ScalarKernel`` does,
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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.ik.kernel import Axis, Step, Value, fold_chain

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


class _Emitter:
    """Straight-line code with constant folding over sums of ``coef * a * b``.

    A name may carry a leading ``-``: negation is folded into the coefficients of
    the expressions that use it, so it never costs an array operation.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._count = 0

    def combine(self, terms: Sequence[tuple[float, Value, Value]]) -> Value:
        """``sum(coef * a * b)``: a folded constant or a (possibly negated) name."""
        constant = 0.0
        parts: list[tuple[float, str]] = []
        for coef, a, b in terms:
            names: list[str] = []
            for x in (a, b):
                if isinstance(x, float):
                    coef *= x
                elif x.startswith("-"):
                    coef, names = -coef, [*names, x[1:]]
                else:
                    names.append(x)
            if abs(coef) < _EPS:
                continue
            if names:
                parts.append((coef, "*".join(names)))
            else:
                constant += coef
        if not parts:
            return constant
        sign = ""
        if all(coef < 0.0 for coef, _ in parts):  # emit the negated sum, return "-name"
            sign, constant = "-", -constant
            parts = [(-coef, product) for coef, product in parts]
        alias = len(parts) == 1 and parts[0][0] == 1.0 and parts[0][1].isidentifier()
        if alias and abs(constant) < _EPS:
            return sign + parts[0][1]  # reuse the name
        parts.sort(key=lambda part: part[0] < 0.0)  # a positive term first: no unary minus
        expression = ""
        for coef, product in parts:
            term = product if abs(coef) == 1.0 else f"{abs(coef)!r}*{product}"
            expression += f" {'-' if coef < 0.0 else '+'} {term}"
        if abs(constant) >= _EPS:
            expression += f" {'-' if constant < 0.0 else '+'} {abs(constant)!r}"
        return sign + self.assign(expression[3:])

    def assign(self, expression: str) -> str:
        """Emit ``v<n> = expression`` and return the new name."""
        self._count += 1
        name = f"v{self._count}"
        self.lines.append(f"    {name} = {expression}")
        return name


def _compose(em: _Emitter, r: list[Value], p: list[Value], f: Array) -> None:
    """``(r, p) <- (r, p) @ f`` in place, ``f`` a constant (3, 4) block."""
    p[:] = [
        em.combine([(float(f[k, 3]), r[3 * i + k], 1.0) for k in range(3)] + [(1.0, p[i], 1.0)])
        for i in range(3)
    ]
    r[:] = [
        em.combine([(float(f[k, j]), r[3 * i + k], 1.0) for k in range(3)])
        for i in range(3)
        for j in range(3)
    ]


def _generate(
    steps: list[Step], tip: Array, dof: int, *, crossed: bool, scalar: bool = False
) -> str:
    """Source of ``f(q, cos, sin, pose, jac, origin)`` filling (12, B) and (6, dof, B) buffers.

    With ``crossed``, only the angular rows of ``jac`` are written, and each joint's
    origin goes to column ``k`` of the (3, dof, B) ``origin`` buffer instead. With
    ``scalar``, the source is of ``g(q, cos, sin)`` on floats, returning the 12 pose
    entries and then the Jacobian row by row as one list.
    """
    em = _Emitter()
    r: list[Value] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    p: list[Value] = [0.0, 0.0, 0.0]
    axes: list[Axis] = []
    for f, prismatic, col, mult, offset in steps:
        _compose(em, r, p, f)
        value = f"q[{col}]"
        if mult != 1.0 or offset != 0.0:  # a mimic follower
            value = em.assign(f"{mult!r}*q[{col}]+{offset!r}")
        axes.append((prismatic, col, mult, [r[2], r[5], r[8]], list(p)))
        if prismatic:
            p[:] = [em.combine([(1.0, p[i], 1.0), (1.0, r[3 * i + 2], value)]) for i in range(3)]
            continue
        c, s = em.assign(f"cos({value})"), em.assign(f"sin({value})")
        for i in range(3):
            a, b = r[3 * i], r[3 * i + 1]
            r[3 * i] = em.combine([(1.0, a, c), (1.0, b, s)])
            r[3 * i + 1] = em.combine([(1.0, b, c), (-1.0, a, s)])
    _compose(em, r, p, tip)
    pose = [*r[0:3], p[0], *r[3:6], p[1], *r[6:9], p[2]]
    if scalar:
        columns = _jacobian(em, axes, p, dof)
        values = [*pose, *(columns[col][row] for row in range(6) for col in range(dof))]
        listing = ", ".join(repr(v) if isinstance(v, float) else v for v in values)
        return "def g(q, cos, sin):\n" + "\n".join([*em.lines, f"    return [{listing}]"]) + "\n"
    out = [_store(f"pose[{k}]", v) for k, v in enumerate(pose)]
    if crossed:
        for _, col, _, z, origin in axes:
            out += [_store(f"jac[{3 + i}, {col}]", z[i]) for i in range(3)]
            out += [_store(f"origin[{i}, {col}]", origin[i]) for i in range(3)]
    else:
        columns = _jacobian(em, axes, p, dof)
        out += [
            _store(f"jac[{row}, {col}]", v)
            for col, column in enumerate(columns)
            for row, v in enumerate(column)
        ]
    return "def f(q, cos, sin, pose, jac, origin):\n" + "\n".join([*em.lines, *out]) + "\n"


def _jacobian(em: _Emitter, axes: list[Axis], tip: list[Value], dof: int) -> list[list[Value]]:
    terms: list[list[list[tuple[float, Value, Value]]]] = [
        [[] for _ in range(6)] for _ in range(dof)
    ]
    for prismatic, col, mult, z, origin in axes:
        if prismatic:
            for i in range(3):
                terms[col][i].append((mult, z[i], 1.0))
            continue
        d = [em.combine([(1.0, tip[i], 1.0), (-1.0, origin[i], 1.0)]) for i in range(3)]
        for i in range(3):
            j, k = (i + 1) % 3, (i + 2) % 3
            terms[col][i].append((mult, z[j], d[k]))
            terms[col][i].append((-mult, z[k], d[j]))
            terms[col][3 + i].append((mult, z[i], 1.0))
    return [[em.combine(t) for t in column] for column in terms]


def _store(target: str, value: Value) -> str:
    """A line writing ``value`` to the buffer row ``target`` (a negated name negates)."""
    if isinstance(value, float):
        return f"    {target} = {value!r}"
    if value.startswith("-"):
        return f"    _negative({value[1:]}, out={target})"
    return f"    {target} = {value}"
