"""FK + Jacobian kernels generated per chain for the IK hot path (scalar serial chains).

A chain of revolute, continuous and prismatic joints (mimic followers included)
is folded once into ``T(q) = F_0 M_0(q) F_1 M_1(q) ... F_n`` where each ``F_k``
is constant (joint origins, fixed joints and the rotation that turns the joint
axis onto z) and each ``M_k`` rotates about, or translates along, z.

That product is then written out as straight-line Python source, with constants
folded and zero terms dropped (URDF frames are mostly axis-aligned, so most
terms vanish), and compiled with ``compile``/``exec``. The source holds only
numbers from the URDF formatted with ``repr``, never user text.

``ScalarKernel.fk_jacobian`` evaluates it on Python floats: for one small chain
this beats numpy's per-call overhead on 4x4 arrays several times over, which is
what keeps a warm-started solve within tens of µs. (The batched solver generates
its own batch-last kernel, in ``codegen.batch_kernel``.)

Results equal ``Chain.fk_jacobian`` to rounding (the tests check 1e-12).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.codegen.emit import Emitter, Term, Value
from hilbot.kinematics.joint import JointType

Array = NDArray[np.float64]
_EPS = 1e-15
#: The line of ``ScalarKernel.expressions`` after which only Jacobian terms are computed.
POSE_DONE = "    # pose done"

_SUPPORTED = frozenset(
    {JointType.FIXED, JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC}
)


class ScalarKernel:
    """Compiled FK + Jacobian of a scalar serial ``Chain`` (see the module docstring).

    Attributes:
        dof: number of configuration columns.
        supported: ``False`` when the chain has planar or floating joints (use the chain).
        source: the generated Python source (for inspection).
    """

    def __init__(self, chain: Any) -> None:
        self.dof = int(chain.dof)
        self.supported = all(j.type in _SUPPORTED for j in chain.path)
        self.source = ""
        self._fkj: Callable[..., tuple[list[Any], list[list[Any]]]] | None = None
        self._fk: Callable[..., list[Any]] | None = None
        self._folded: tuple[list[Step], Array] | None = None
        if self.supported:
            steps, tip = self._folded = fold_chain(chain)
            self.source = _generate(steps, tip, self.dof, jacobian=True)
            self._fkj = _compile(self.source)
            self._fk = _compile(_generate(steps, tip, self.dof, jacobian=False))

    def fk_jacobian(self, q: list[float]) -> tuple[list[float], list[list[float]]]:
        """Pose and Jacobian at ``q`` (a list of ``dof`` floats).

        Returns:
            ``(pose, columns)``: the target pose as 12 floats (the top 3x4 block,
            row-major) and the Jacobian as ``dof`` columns of 6 floats each
            (linear then angular, source frame).
        """
        assert self._fkj is not None
        return self._fkj(q, math.cos, math.sin)

    def expressions(self) -> tuple[list[str], list[str], list[list[str]]]:
        """The straight-line code of ``fk_jacobian`` for fusing into other generated code.

        Returns:
            ``(lines, pose, columns)``: statements (indented 4 spaces, reading ``q[k]``
            and calling ``cos``/``sin``; they assign only names ``v<n>``), the 12 pose
            entries and ``dof`` columns of 6 Jacobian entries, each a Python literal, the
            name of a variable the lines assign, or such a name negated in parentheses
            (``(-v3)``: negation is folded, not computed, where it can be). The pose is
            complete at the comment line ``POSE_DONE``; the lines after it only serve the
            Jacobian.
        """
        assert self._folded is not None
        steps, tip = self._folded
        return _expressions(steps, tip, self.dof)

    def fk(self, q: list[float]) -> list[float]:
        """The target pose at ``q`` as 12 floats (top 3x4 block, row-major)."""
        assert self._fk is not None
        return self._fk(q, math.cos, math.sin)


def _align(axis: Array) -> Array:
    """A 4x4 rotation whose z column is ``axis``."""
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    if abs(abs(a[2]) - 1.0) < _EPS:
        out = np.eye(4)
        if a[2] < 0:
            out[:3, :3] = np.diag([1.0, -1.0, -1.0])
        return out
    helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, a)
    x /= np.linalg.norm(x)
    out = np.eye(4)
    out[:3, :3] = np.column_stack((x, np.cross(a, x), a))
    return out


Step = tuple[Array, bool, int, float, float]  # F (3, 4), prismatic, column, mult, offset
Axis = tuple[bool, int, float, list[Value], list[Value]]  # prismatic, column, mult, z, origin


def fold_chain(chain: Any) -> tuple[list[Step], Array]:
    """Constant transforms and elementary z-motions of the chain, in order."""
    start = {name: i for i, (name, k) in enumerate(chain.jacobian_columns) if k == 0}
    steps: list[Step] = []
    pending = np.eye(4)
    for joint in chain.path:
        pending = pending @ joint.origin
        if joint.type is JointType.FIXED:
            continue
        align = _align(joint.axis)
        mimic = chain.robot.leader(joint.name)
        leader = joint.name if mimic is None else mimic.joint
        mult = 1.0 if mimic is None else float(mimic.multiplier)
        offset = 0.0 if mimic is None else float(mimic.offset)
        prismatic = joint.type is JointType.PRISMATIC
        steps.append(((pending @ align)[:3], prismatic, start[leader], mult, offset))
        pending = align.T
    return steps, pending[:3]


def _compose(em: Emitter, r: list[Value], p: list[Value], f: Array) -> None:
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


def emit_pose(em: Emitter, steps: list[Step], tip: Array) -> tuple[list[Value], list[Axis]]:
    """Emit the pose of the folded chain: its 12 entries (top 3x4, row-major) and the axes."""
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
    return [*r[0:3], p[0], *r[3:6], p[1], *r[6:9], p[2]], axes


def emit_jacobian(em: Emitter, axes: list[Axis], tip: list[Value], dof: int) -> list[list[Value]]:
    """Emit the geometric Jacobian (``dof`` columns, linear rows first) of ``emit_pose``'s axes."""
    terms: list[list[list[Term]]] = [[[] for _ in range(6)] for _ in range(dof)]
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


def _pose(steps: list[Step], tip: Array) -> tuple[Emitter, list[Value], list[Axis]]:
    em = Emitter()
    pose, axes = emit_pose(em, steps, tip)
    return em, pose, axes


def _expressions(
    steps: list[Step], tip: Array, dof: int
) -> tuple[list[str], list[str], list[list[str]]]:
    """Lines, pose entries and Jacobian columns (see ``ScalarKernel.expressions``)."""
    em, pose, axes = _pose(steps, tip)
    tip_position = [pose[3], pose[7], pose[11]]
    pose_lines = len(em.lines)
    columns = emit_jacobian(em, axes, tip_position, dof)
    # The pose needs only the first ``pose_lines`` lines; a marker comment splits them.
    return (
        [*em.lines[:pose_lines], POSE_DONE, *em.lines[pose_lines:]],
        [_literal(v) for v in pose],
        [[_literal(v) for v in col] for col in columns],
    )


def _generate(steps: list[Step], tip: Array, dof: int, *, jacobian: bool) -> str:
    """Python source of ``f(q, cos, sin)`` returning the pose (and Jacobian columns)."""
    if not jacobian:
        em, pose, _ = _pose(steps, tip)
        body = [*em.lines, f"    pose = [{', '.join(_literal(v) for v in pose)}]"]
        return "def f(q, cos, sin):\n" + "\n".join([*body, "    return pose"]) + "\n"
    lines, pose_values, columns = _expressions(steps, tip, dof)
    listing = ", ".join("[" + ", ".join(col) + "]" for col in columns)
    body = [*lines, f"    pose = [{', '.join(pose_values)}]", f"    return pose, [{listing}]"]
    return "def f(q, cos, sin):\n" + "\n".join(body) + "\n"


def _literal(value: Value) -> str:
    """A constant's ``repr``, a name, or a negated name in parentheses (``(-v3)``)."""
    if isinstance(value, float):
        return repr(value)
    return f"({value})" if value.startswith("-") else value


def _compile(source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<hilbot ik kernel>", "exec"), namespace)  # the source holds only numbers
    return namespace["f"]  # type: ignore[no-any-return]
