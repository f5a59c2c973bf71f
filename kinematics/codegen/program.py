"""Compile a chain into elementary motions, and evaluate FK and Jacobians over a batch axis.

A chain from a source link to a target link is rewritten, once, as a product

    T(q) = C_0 M_0(q) C_1 M_1(q) ... C_{n-1} M_{n-1}(q) E

where every ``C_k`` is a constant (origins of consecutive joints, fixed joints and the
rotation that turns each joint axis onto z, folded together), every ``M_k`` is an elementary
motion: a rotation about z, a translation along z, or a free 6-DoF motion, and ``E`` is a
constant. Planar joints become two translations and a rotation. Per call only the ``M_k``
depend on ``q``: ``C_k M_k(q)`` is an affine function of ``(cos, sin, value)`` for scalar
motions, evaluated for all motions at once, and the products are a few batched matmuls.
With the axis on z, a joint's axis and position in the source frame are read straight off
the cumulative transform (column 2 and column 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics import spatial
from hilbot.kinematics.joint import Joint, JointType, Mimic, plane_basis

Array = NDArray[np.float64]
IntArray = NDArray[np.intp]

REV, PRIS, FREE = 0, 1, 2
_Z = np.array([0.0, 0.0, 1.0])


@dataclass(frozen=True, eq=False)
class Program:
    """The compiled form of a chain (all arrays read-only in use).

    Attributes:
        kinds: (n,) motion kind per element (REV, PRIS, FREE).
        consts: (n, 4, 4) constant transform before each element.
        scalar: (s,) indices of scalar (REV/PRIS) elements.
        col: (s,) configuration column driving each scalar element.
        mult: (s,) mimic multiplier per scalar element (1 if not a mimic).
        offset: (s,) mimic offset per scalar element (0 if not a mimic).
        plain: Whether ``col`` is 0..s-1 with unit multipliers and zero offsets.
        rev, pris: Element indices of rotations and translations; ``rev_v``, ``pris_v``
            their positions among the scalar elements; ``all_rev``: every element rotates.
        rev_x, rev_y: (r, 4) columns 0 and 1 of the constants of rotations; ``pris_z``
            (t, 4) column 2 of the constants of translations.
        free: (f,) indices of FREE elements; ``free_col`` (f,) their first column.
        z_only: No FREE element (Jacobian columns are the elements' z axes, in order).
        jac_elem, jac_axis: (m,) element and axis (0, 1, 2 of its frame) of each elementary
            Jacobian column; ``jac_rev`` (m,) 1.0 for rotations, 0.0 for translations.
        select: (m, dof) map from elementary columns to chain columns, or ``None`` for identity.
        frames: link -> (element index or -1 for the source, constant after it).
        dof: Number of chain columns.
    """

    kinds: IntArray
    consts: Array
    scalar: IntArray
    col: IntArray
    mult: Array
    offset: Array
    plain: bool
    rev: IntArray
    rev_v: IntArray
    all_rev: bool
    pris: IntArray
    pris_v: IntArray
    rev_x: Array
    rev_y: Array
    pris_z: Array
    free: IntArray
    free_col: IntArray
    z_only: bool
    jac_elem: IntArray
    jac_axis: IntArray
    jac_rev: Array
    select: Array | None
    frames: dict[str, tuple[int, Array]]
    dof: int

    @property
    def size(self) -> int:
        """Number of elements."""
        return len(self.kinds)


class _Builder:
    def __init__(self, columns: dict[str, int]) -> None:
        self.columns = columns
        self.kinds: list[int] = []
        self.consts: list[Array] = []
        self.drive: list[tuple[int, float, float]] = []  # (column, multiplier, offset)
        self.pending = np.eye(4)

    def element(self, kind: int, axis: Array, drive: tuple[int, float, float]) -> None:
        align = spatial.transform(spatial.rotation_between(_Z, axis))
        self.kinds.append(kind)
        self.consts.append(self.pending @ align)
        self.drive.append(drive)
        self.pending = spatial.inverse_transform(align)

    def free(self, column: int) -> None:
        self.kinds.append(FREE)
        self.consts.append(self.pending)
        self.drive.append((column, 1.0, 0.0))
        self.pending = np.eye(4)

    def joint(self, joint: Joint, mimic: Mimic | None) -> None:
        self.pending = self.pending @ joint.origin
        kind = joint.type
        if kind is JointType.FIXED:
            return
        if mimic is not None:
            drive = (self.columns[mimic.joint], mimic.multiplier, mimic.offset)
        else:
            drive = (self.columns[joint.name], 1.0, 0.0)
        if kind in (JointType.REVOLUTE, JointType.CONTINUOUS):
            self.element(REV, joint.axis, drive)
        elif kind is JointType.PRISMATIC:
            self.element(PRIS, joint.axis, drive)
        elif kind is JointType.PLANAR:
            basis = plane_basis(joint.axis)
            c = drive[0]
            self.element(PRIS, basis[:, 0], (c, 1.0, 0.0))
            self.element(PRIS, basis[:, 1], (c + 1, 1.0, 0.0))
            self.element(REV, basis[:, 2], (c + 2, 1.0, 0.0))
        else:
            self.free(drive[0])


def compile_chain(
    joints: list[Joint], leaders: dict[str, Mimic], columns: dict[str, int], dof: int, source: str
) -> Program:
    """Compile the path ``joints`` (source to target) into a :class:`Program`.

    Args:
        joints: The joints on the path, in order.
        leaders: Mimic followers -> their ultimate leader.
        columns: Joint -> first chain column, for every joint that has columns.
        dof: Number of chain columns.
        source: The source link.
    """
    b = _Builder(columns)
    frames: dict[str, tuple[int, Array]] = {source: (-1, np.eye(4))}
    for joint in joints:
        b.joint(joint, leaders.get(joint.name))
        frames[joint.child] = (len(b.kinds) - 1, b.pending.copy())
    n = len(b.kinds)
    kinds = np.array(b.kinds, dtype=np.intp)
    consts = np.array(b.consts).reshape(n, 4, 4)
    scalar = np.flatnonzero(kinds != FREE)
    col = np.array([b.drive[e][0] for e in scalar], dtype=np.intp)
    mult = np.array([b.drive[e][1] for e in scalar])
    offset = np.array([b.drive[e][2] for e in scalar])
    free = np.flatnonzero(kinds == FREE)
    scalar_kinds = kinds[scalar]
    jac_elem, jac_axis, jac_rev, select = _columns(kinds, b.drive, dof)
    plain = bool(
        len(scalar) == n
        and np.array_equal(col, np.arange(n))
        and np.all(mult == 1.0)
        and np.all(offset == 0.0)
    )
    return Program(
        kinds=kinds,
        consts=consts,
        scalar=scalar,
        col=col,
        mult=mult,
        offset=offset,
        plain=plain,
        rev=scalar[scalar_kinds == REV],
        rev_v=np.flatnonzero(scalar_kinds == REV),
        all_rev=bool(len(scalar) == n and (scalar_kinds == REV).all()),
        pris=scalar[scalar_kinds == PRIS],
        pris_v=np.flatnonzero(scalar_kinds == PRIS),
        rev_x=consts[scalar[scalar_kinds == REV], :, 0],
        rev_y=consts[scalar[scalar_kinds == REV], :, 1],
        pris_z=consts[scalar[scalar_kinds == PRIS], :, 2],
        free=free,
        z_only=not len(free),
        free_col=np.array([b.drive[e][0] for e in free], dtype=np.intp),
        jac_elem=jac_elem,
        jac_axis=jac_axis,
        jac_rev=jac_rev,
        select=select,
        frames=frames,
        dof=dof,
    )


def _columns(
    kinds: IntArray, drive: list[tuple[int, float, float]], dof: int
) -> tuple[IntArray, IntArray, Array, Array | None]:
    elem: list[int] = []
    axis: list[int] = []
    rev: list[float] = []
    rows: list[tuple[int, float]] = []
    for e, kind in enumerate(kinds):
        column, multiplier, _ = drive[e]
        if kind == FREE:
            for k in range(6):
                elem.append(e)
                axis.append(k % 3)
                rev.append(float(k >= 3))
                rows.append((column + k, 1.0))
        else:
            elem.append(e)
            axis.append(2)
            rev.append(float(kind == REV))
            rows.append((column, multiplier))
    select = np.zeros((len(rows), dof))
    for i, (column, multiplier) in enumerate(rows):
        select[i, column] = multiplier
    identity = select.shape[0] == dof and np.array_equal(select, np.eye(dof))
    return (
        np.array(elem, dtype=np.intp),
        np.array(axis, dtype=np.intp),
        np.array(rev),
        None if identity else select,
    )


# The batch functions below keep the batch axis LAST, (..., B): every numpy operation then
# runs over contiguous length-B vectors. With the batch first, the innermost axis would have
# length 3 or 4 and numpy's per-inner-loop overhead would dominate (measured 2-3x slower).


def local_transforms(p: Program, q: Array) -> Array:
    """``C_k M_k(q)`` for every element: (n, 4, 4, B) from ``q`` (B, dof)."""
    batch = q.shape[0]
    qt = q.T  # (dof, B)
    out = np.empty((p.size, 4, 4, batch))
    out[:] = p.consts[..., None]
    columns = out.swapaxes(1, 2)  # a view indexed (element, column, row, B)
    if len(p.scalar):
        v = qt if p.plain else qt[p.col] * p.mult[:, None] + p.offset[:, None]
        if len(p.rev):
            # C @ Rz(v): columns 0 and 1 turn by v; columns 2 and 3 stay.
            a = v if p.all_rev else v[p.rev_v]
            c = np.cos(a)[:, None, :]
            s = np.sin(a)[:, None, :]
            x, y = p.rev_x[:, :, None], p.rev_y[:, :, None]
            if p.all_rev:
                columns[:, 0] = c * x + s * y
                columns[:, 1] = c * y - s * x
            else:
                columns[p.rev, 0] = c * x + s * y
                columns[p.rev, 1] = c * y - s * x
        if len(p.pris):
            # C @ Tz(v): column 3 gains v times column 2.
            columns[p.pris, 3] += v[p.pris_v][:, None, :] * p.pris_z[:, :, None]
    for e, column in zip(p.free, p.free_col, strict=True):
        motion = np.zeros((4, 4, batch))
        motion[:3, :3] = spatial.so3_exp_batch(q[:, column + 3 : column + 6]).transpose(1, 2, 0)
        motion[:3, 3] = qt[column : column + 3]
        motion[3, 3] = 1.0
        out[e] = np.einsum("ij,jkb->ikb", p.consts[e], motion)
    return out


def cumulative(p: Program, local: Array) -> Array:
    """Running products ``W_k = C_0 M_0 ... C_k M_k``: (n, 4, 4, B)."""
    w = np.empty_like(local)
    w[0] = local[0]
    for e in range(1, p.size):
        a, b = w[e - 1], local[e]
        # Rigid transforms: the last rows are (0, 0, 0, 1), so three products and a shift.
        w[e, :3] = a[:3, 0, None] * b[0] + a[:3, 1, None] * b[1] + a[:3, 2, None] * b[2]
        w[e, :3, 3] += a[:3, 3]
        w[e, 3] = b[3]
    return w


def frame_pose(p: Program, w: Array, link: str) -> Array:
    """Pose (4, 4, B) of ``link`` (on the chain) from the running products (n, 4, 4, B)."""
    e, post = p.frames[link]
    if e < 0:
        return np.repeat(post[..., None], w.shape[-1], axis=-1)
    out: Array = np.einsum("ikb,kj->ijb", w[e], post)
    return out


def jacobian(p: Program, w: Array, point: Array) -> Array:
    """Geometric Jacobians (6, dof, B) at ``point`` (3, B), in the source frame.

    Args:
        p: The program.
        w: Running products (n, 4, 4, B).
        point: Reference point per batch item.
    """
    if p.z_only:  # one column per element, each about its own z: plain views
        axes, origins = w[:, :3, 2], w[:, :3, 3]  # (m, 3, B)
    else:
        columns = w.swapaxes(1, 2)  # (n, column, row, B): adjacent fancy indices keep (m, .)
        axes = columns[p.jac_elem, p.jac_axis, :3]
        origins = columns[p.jac_elem, 3, :3]
    d = point[None] - origins
    ax, ay, az = axes[:, 0], axes[:, 1], axes[:, 2]
    dx, dy, dz = d[:, 0], d[:, 1], d[:, 2]
    rev = p.jac_rev[:, None]
    j = np.empty((6, len(p.jac_rev), w.shape[-1]))
    # Rotations: the axis crossed with the lever arm; translations: the axis itself.
    j[0] = ax + rev * (ay * dz - az * dy - ax)
    j[1] = ay + rev * (az * dx - ax * dz - ay)
    j[2] = az + rev * (ax * dy - ay * dx - az)
    j[3:] = (axes * rev[:, None]).transpose(1, 0, 2)
    if p.select is None:
        return j
    out: Array = np.einsum("rmb,md->rdb", j, p.select)
    return out
