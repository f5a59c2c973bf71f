"""Generate straight-line Python for the FK and Jacobian of one chain (the single-call hot path).

For one configuration of a small chain, numpy's per-call overhead (about a microsecond per
operation) dominates: a 6-DoF FK + Jacobian needs dozens of tiny array operations. Instead,
the compiled :class:`~hilbot.kinematics.codegen.program.Program` is unrolled, once per chain, into a
Python function of plain float arithmetic. Constants are folded while generating: entries of
the fixed transforms that are 0 or ±1 (axis-aligned URDF frames, within 1e-14) produce no
operation at all, so a typical arm costs a few dozen float operations per joint. A floating
joint's rotation comes from one helper call (Rodrigues' formula on its rotation vector).

The generated source is kept on the function as ``__source__`` for inspection.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple, cast

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.codegen.emit import Emitter, Term, Value
from hilbot.kinematics.codegen.program import FREE, PRIS, REV, Program

Array = NDArray[np.float64]
Sym = Value
PoseKernel = Callable[[Array], Array]
JacobianKernel = Callable[[Array], tuple[Array, Array]]

_SNAP = 1e-14


def _snap(x: float) -> float:
    for v in (0.0, 1.0, -1.0):
        if abs(x - v) < _SNAP:
            return v
    return float(x)


def _rigid_times_const(
    em: Emitter, rot: list[list[Sym]], pos: list[Sym], c: Array
) -> tuple[list[list[Sym]], list[Sym]]:
    """Symbolic ``[rot pos] @ c`` for a numeric 4 x 4 ``c``."""
    new_rot = [
        [em.combine([(1.0, rot[i][k], _snap(c[k, j])) for k in range(3)]) for j in range(3)]
        for i in range(3)
    ]
    new_pos = [
        em.combine([(1.0, rot[i][k], _snap(c[k, 3])) for k in range(3)] + [(1.0, pos[i], 1.0)])
        for i in range(3)
    ]
    return new_rot, new_pos


def _sym(x: Sym) -> str:
    return repr(x) if isinstance(x, float) else x


def _rotvec(x: float, y: float, z: float) -> tuple[float, ...]:
    """Row-major entries of ``so3_exp((x, y, z))`` (same formula as :mod:`spatial`)."""
    t2 = x * x + y * y + z * z
    if t2 < 1e-12:
        a, b = 1.0 - t2 / 6.0, 0.5 - t2 / 24.0
    else:
        theta = math.sqrt(t2)
        a, b = math.sin(theta) / theta, (1.0 - math.cos(theta)) / t2
    return (
        1.0 - b * (y * y + z * z), b * x * y - a * z, b * x * z + a * y,
        b * x * y + a * z, 1.0 - b * (x * x + z * z), b * y * z - a * x,
        b * x * z - a * y, b * y * z + a * x, 1.0 - b * (x * x + y * y),
    )  # fmt: skip


class _Frame(NamedTuple):
    """What the Jacobian needs of one element: its frame after the motion."""

    kind: int
    col: int
    mult: float
    axes: list[list[Sym]]  # columns of the frame's rotation: x, y, z
    origin: list[Sym]


def _drives(p: Program) -> dict[int, tuple[int, float, float]]:
    drives = {
        int(e): (int(c), float(m), float(o))
        for e, c, m, o in zip(p.scalar, p.col, p.mult, p.offset, strict=True)
    }
    drives.update({int(e): (int(c), 1.0, 0.0) for e, c in zip(p.free, p.free_col, strict=True)})
    return drives


def _emit_motion(
    em: Emitter, kind: int, drive: tuple[int, float, float], rot: list[list[Sym]],
    pos: list[Sym],
) -> tuple[list[list[Sym]], list[Sym]]:  # fmt: skip
    """Symbolic ``[rot pos] @ M(q)`` for one elementary motion."""
    col, mult, offset = drive
    if kind == FREE:
        r = [f"r{col}_{k}" for k in range(9)]
        em.lines.append(f"    {', '.join(r)} = _rotvec(q{col + 3}, q{col + 4}, q{col + 5})")
        m = [r[0:3], r[3:6], r[6:9]]
        t = [f"q{col}", f"q{col + 1}", f"q{col + 2}"]
        new_rot = [
            [em.combine([(1.0, rot[i][k], m[k][j]) for k in range(3)]) for j in range(3)]
            for i in range(3)
        ]
        new_pos = [
            em.combine([(1.0, rot[i][k], t[k]) for k in range(3)] + [(1.0, pos[i], 1.0)])
            for i in range(3)
        ]
        return new_rot, new_pos
    value = em.combine([(mult, f"q{col}", 1.0), (offset, 1.0, 1.0)])
    if kind == REV:
        c = em.assign(f"_cos({_sym(value)})")
        s = em.assign(f"_sin({_sym(value)})")
        x = [em.combine([(1.0, c, rot[i][0]), (1.0, s, rot[i][1])]) for i in range(3)]
        y = [em.combine([(1.0, c, rot[i][1]), (-1.0, s, rot[i][0])]) for i in range(3)]
        return [[x[i], y[i], rot[i][2]] for i in range(3)], pos
    return rot, [em.combine([(1.0, pos[i], 1.0), (1.0, value, rot[i][2])]) for i in range(3)]


def pose_kernel(
    p: Program, targets: Sequence[tuple[int, Array]], *, stacked: bool = False
) -> PoseKernel:
    """Build ``f(q) -> poses``: (len(targets), 4, 4) if ``stacked``, else one (4, 4) pose.

    Args:
        p: A compiled chain.
        targets: ``(element index, constant after it)`` of each pose; element index -1 is
            the source frame. Without ``stacked``, exactly one.
        stacked: Return a stack of poses.
    """
    return cast(PoseKernel, _generate(p, targets, with_jacobian=False, stacked=stacked))


def jacobian_kernel(p: Program, target: tuple[int, Array]) -> JacobianKernel:
    """Build ``f(q) -> (pose (4, 4), Jacobian (6, dof))`` of one target.

    Elements after the target do not move it: their Jacobian columns are zero.
    """
    return cast(JacobianKernel, _generate(p, [target], with_jacobian=True, stacked=False))


def _generate(
    p: Program, targets: Sequence[tuple[int, Array]], with_jacobian: bool, stacked: bool
) -> Callable[[Array], object]:
    """Emit, compile and return the kernel (see :func:`pose_kernel`, :func:`jacobian_kernel`)."""
    em = Emitter()
    rot: list[list[Sym]] = [[float(i == j) for j in range(3)] for i in range(3)]
    pos: list[Sym] = [0.0, 0.0, 0.0]
    running = {-1: (rot, pos)}
    frames: list[_Frame] = []
    drives = _drives(p)
    for e in range(max(e for e, _ in targets) + 1):
        kind = int(p.kinds[e])
        rot, pos = _rigid_times_const(em, rot, pos, p.consts[e])
        rot, pos = _emit_motion(em, kind, drives[e], rot, pos)
        axes = [[rot[i][k] for i in range(3)] for k in range(3)]
        frames.append(_Frame(kind, drives[e][0], drives[e][1], axes, pos))
        running[e] = (rot, pos)
    out: list[Sym] = []
    points = []
    for e, post in targets:
        rot, pos = _rigid_times_const(em, *running[e], post)
        out += [*rot[0], pos[0], *rot[1], pos[1], *rot[2], pos[2], 0.0, 0.0, 0.0, 1.0]
        points.append((e, pos))
    if with_jacobian:
        e, point = points[0]
        out += _jacobian(em, p.dof, frames[: e + 1], point)
    names = ", ".join(f"q{i}" for i in range(p.dof))
    unpack = f"    {names}{',' if p.dof == 1 else ''} = q.tolist()" if p.dof else ""
    values = ", ".join(map(_sym, out))
    # Packing the floats as bytes and viewing them with np.ndarray is several times faster
    # than np.array or np.fromiter on Python floats; the bytearray makes results writable.
    if with_jacobian:
        result = f"_nd((4, 4), _f64, b), _nd((6, {p.dof}), _f64, b, 128)"
    elif stacked:
        result = f"_nd(({len(targets)}, 4, 4), _f64, b)"
    else:
        result = "_nd((4, 4), _f64, b)"
    body = "\n".join(
        [unpack, *em.lines, f"    b = _bytearray(_pack({values}))", f"    return {result}"]
    )
    source = f"def chain_kernel(q):\n{body}\n"
    namespace: dict[str, object] = {
        "_cos": math.cos,
        "_sin": math.sin,
        "_rotvec": _rotvec,
        "_pack": struct.Struct(f"={len(out)}d").pack,
        "_bytearray": bytearray,
        "_nd": np.ndarray,
        "_f64": np.dtype(np.float64),
    }
    # The source is built only from numbers and generated names, never from user text.
    exec(compile(source, f"<chain kernel {p.size} elements>", "exec"), namespace)
    fn = cast(Callable[[Array], object], namespace["chain_kernel"])
    fn.__source__ = source  # type: ignore[attr-defined]
    return fn


def _moment(em: Emitter, axis: list[Sym], d: list[Sym]) -> list[Sym]:
    """Symbolic ``cross(axis, d)``."""
    return [
        em.combine(
            [(1.0, axis[(i + 1) % 3], d[(i + 2) % 3]), (-1.0, axis[(i + 2) % 3], d[(i + 1) % 3])]
        )
        for i in range(3)
    ]


def _jacobian(em: Emitter, dof: int, frames: list[_Frame], target: list[Sym]) -> list[Sym]:
    """Symbolic Jacobian entries (row-major 6 x dof) from each element's frame."""
    columns: list[list[list[Term]]] = [[[] for _ in range(6)] for _ in range(dof)]
    zero: list[Sym] = [0.0, 0.0, 0.0]
    for f in frames:
        if f.kind == PRIS:
            contributions = [(f.col, [*f.axes[2], *zero])]
        else:
            d = [em.combine([(1.0, target[i], 1.0), (-1.0, f.origin[i], 1.0)]) for i in range(3)]
            spins = f.axes if f.kind == FREE else [f.axes[2]]
            first = f.col + 3 if f.kind == FREE else f.col
            contributions = [(first + k, [*_moment(em, a, d), *a]) for k, a in enumerate(spins)]
            if f.kind == FREE:
                contributions += [(f.col + k, [*a, *zero]) for k, a in enumerate(f.axes)]
        for col, values in contributions:
            for row, value in enumerate(values):
                columns[col][row].append((f.mult, value, 1.0))
    return [em.combine(columns[c][row]) for row in range(6) for c in range(dof)]
