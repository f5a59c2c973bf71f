"""A kinematic chain from a source link to a descendant target link: FK, Jacobians, q algebra."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from hilbot.kinematics import spatial
from hilbot.kinematics.codegen import chain_kernels, program
from hilbot.kinematics.errors import UnknownLink
from hilbot.kinematics.joint import Joint, JointType, Mimic, coordinates

Array = NDArray[np.float64]
_T = TypeVar("_T")
_MISSING = object()


class JointTree(Protocol):
    """What a ``Chain`` asks of the tree it is cut from (``Robot`` is one).

    The dependency points one way: ``robot`` builds chains, and ``chain`` knows the
    robot only through these three questions.
    """

    @property
    def joints(self) -> Mapping[str, Joint]:
        """Every joint by name."""
        ...

    def path_joints(self, source_link: str, target_link: str) -> list[Joint]:
        """The joints from ``source_link`` down to ``target_link``, in order."""
        ...

    def leader(self, joint: str) -> Mimic | None:
        """A mimic follower's ultimate leader, ``None`` for other joints."""
        ...


class Chain:
    """The joints between ``source`` and its descendant ``target``, compiled for speed.

    Get one with :meth:`Robot.path_between`. The configuration ``q`` of a chain is a flat
    vector of ``dof`` numbers in column order (see :attr:`jacobian_columns`): one per
    revolute, continuous or prismatic joint; ``(x, y, theta)`` for a planar joint;
    ``(x, y, z, rx, ry, rz)`` (position, rotation vector) for a floating joint. Mimic
    followers have no column: they follow their leader, which gets a column even when it
    is not itself on the path. Poses and Jacobians are expressed in the source frame.

    Attributes:
        robot: The robot the chain belongs to (a ``Robot``, as a ``JointTree``).
        source: The source link (the frame of every result).
        target: The target link.
        links: Links on the path, source first, target last.
        path: Every joint on the path, fixed and mimic ones included, source to target.
        joints: The joints that own configuration columns, in column order.
        jacobian_columns: Column -> ``(joint name, index within the joint)``.
        dof: Number of columns.
        lower: (dof,) lower position bounds (``-inf`` where unbounded).
        upper: (dof,) upper position bounds (``inf`` where unbounded).
        velocity_limit: (dof,) URDF velocity limits (``inf`` where none, and for the
            coordinates of planar and floating joints).
    """

    def __init__(self, robot: JointTree, source: str, target: str) -> None:
        path = robot.path_joints(source, target)
        self.robot = robot
        self.source = source
        self.target = target
        self.links: tuple[str, ...] = (source, *(j.child for j in path))
        self.path: tuple[Joint, ...] = tuple(path)
        joints: list[Joint] = []
        on_path = {j.name for j in path}
        for j in path:
            mimic = robot.leader(j.name)
            if mimic is None and j.dof > 0:
                joints.append(j)
            elif mimic is not None and mimic.joint not in on_path:
                leader = robot.joints[mimic.joint]
                if leader not in joints:
                    joints.append(leader)
        self.joints: tuple[Joint, ...] = tuple(joints)
        self._start: dict[str, int] = {}
        columns: list[tuple[str, int]] = []
        for j in joints:
            self._start[j.name] = len(columns)
            columns.extend((j.name, k) for k in range(j.type.dof))
        self.jacobian_columns: tuple[tuple[str, int], ...] = tuple(columns)
        self._slots = [(j, self._start[j.name], j.type.dof == 1) for j in joints]
        self.dof = len(columns)
        leaders = {j.name: m for j in path if (m := robot.leader(j.name)) is not None}
        self._program = program.compile_chain(path, leaders, self._start, self.dof, source)
        self.lower, self.upper, self.velocity_limit = self._bounds()
        self._floating = [self._start[j.name] for j in joints if j.type is JointType.FLOATING]
        self._shape = (self.dof,)
        # Generated lazily (a few ms each): fk, fk + Jacobian, link poses, Jacobian per link.
        self._kernel_fk: chain_kernels.PoseKernel | None = None
        self._kernel_fj: chain_kernels.JacobianKernel | None = None
        self._kernel_links: chain_kernels.PoseKernel | None = None
        self._kernels_at: dict[str, chain_kernels.JacobianKernel] = {}

    def _call(self, kernel: Callable[[Array], _T], q: npt.ArrayLike | Mapping[str, object]) -> _T:
        if type(q) is not np.ndarray or q.shape != self._shape:
            q = self.q_from(q)
        try:
            return kernel(q)
        except (ValueError, OverflowError) as exc:  # math.cos(inf) raises: name the cause
            raise ValueError(f"{self!r}: configuration is not finite: {q!r}") from exc

    def __repr__(self) -> str:
        return f"Chain({self.source!r} -> {self.target!r}, dof={self.dof})"

    def _bounds(self) -> tuple[Array, Array, Array]:
        lower, upper, velocity = [], [], []
        for j in self.joints:
            lo, hi = j.bounds()
            vel = j.limit.velocity if j.limit is not None else np.inf
            n = j.type.dof
            lower += [lo] * n
            upper += [hi] * n
            velocity += [vel if n == 1 else np.inf] * n
        return np.array(lower), np.array(upper), np.array(velocity)

    # --- configurations --------------------------------------------------------------------

    def q_from(
        self,
        q_or_mapping: npt.ArrayLike | Mapping[str, object],
        default: npt.ArrayLike | None = None,
    ) -> Array:
        """The flat configuration (dof,) from a flat vector or a joint-name mapping.

        A mapping may hold other joints (they are ignored); values are floats, or for planar
        and floating joints any form :func:`hilbot.kinematics.joint.coordinates` accepts
        (e.g. a (4, 4) pose).

        Raises:
            KeyError: A chain joint is missing from the mapping and no ``default`` is given.
            ValueError: A flat vector does not have shape (dof,).
        """
        if isinstance(q_or_mapping, Mapping):
            out = (
                np.zeros(self.dof)
                if default is None
                else np.array(default, dtype=np.float64).reshape(self.dof)
            )
            missing = []
            for j, c, scalar in self._slots:
                value = q_or_mapping.get(j.name, _MISSING)
                if scalar and isinstance(value, float | int):  # common case, np.float64 too
                    out[c] = value
                elif value is not _MISSING:
                    out[c : c + j.type.dof] = coordinates(j, value)
                else:
                    missing.append(j.name)
            if missing and default is None:
                raise KeyError(f"no configuration for chain joints {missing}")
            return out
        q = np.asarray(q_or_mapping, dtype=np.float64)
        if q.shape != (self.dof,):
            raise ValueError(f"{self!r} needs q of shape ({self.dof},), got {q.shape}")
        return q

    def q_to_dict(self, q: npt.ArrayLike) -> dict[str, float | Array]:
        """Joint name -> configuration (a float, or an array for planar/floating joints)."""
        v = self.q_from(q)
        out: dict[str, float | Array] = {}
        for j in self.joints:
            c = self._start[j.name]
            out[j.name] = float(v[c]) if j.type.dof == 1 else v[c : c + j.type.dof].copy()
        return out

    def integrate(self, q: npt.ArrayLike, dq: npt.ArrayLike) -> Array:
        """Move ``q`` by the tangent vector ``dq`` (both (dof,)).

        Scalar and planar coordinates add. A floating joint moves in its own (child) frame:
        ``p' = p + R dv`` and ``R' = R exp(dw)``, so the Jacobian columns are the derivative
        of FK along this map.
        """
        a, d = self.q_from(q), self.q_from(dq)
        out = a + d
        for c in self._floating:
            rot = spatial.so3_exp(a[c + 3 : c + 6])
            out[c : c + 3] = a[c : c + 3] + rot @ d[c : c + 3]
            out[c + 3 : c + 6] = spatial.so3_log(rot @ spatial.so3_exp(d[c + 3 : c + 6]))
        return out

    def difference(self, q1: npt.ArrayLike, q0: npt.ArrayLike) -> Array:
        """The tangent ``dq`` with ``integrate(q0, dq) == q1`` (inverse of :meth:`integrate`)."""
        a, b = self.q_from(q1), self.q_from(q0)
        out = a - b
        for c in self._floating:
            r0 = spatial.so3_exp(b[c + 3 : c + 6])
            out[c : c + 3] = r0.T @ (a[c : c + 3] - b[c : c + 3])
            out[c + 3 : c + 6] = spatial.so3_log(r0.T @ spatial.so3_exp(a[c + 3 : c + 6]))
        return out

    # --- kinematics ------------------------------------------------------------------------

    def _running(self, qb: Array) -> Array:
        p = self._program
        return program.cumulative(p, program.local_transforms(p, qb))

    def fk(self, q: npt.ArrayLike | Mapping[str, object]) -> Array:
        """Pose (4, 4) of the target link in the source frame."""
        kernel = self._kernel_fk
        if kernel is None:
            target = self._program.frames[self.target]
            kernel = self._kernel_fk = chain_kernels.pose_kernel(self._program, [target])
        return self._call(kernel, q)

    def jacobian(self, q: npt.ArrayLike | Mapping[str, object]) -> Array:
        """Geometric Jacobian (6, dof), linear rows first, in the source frame, at the target."""
        return self.fk_jacobian(q)[1]

    def fk_jacobian(self, q: npt.ArrayLike | Mapping[str, object]) -> tuple[Array, Array]:
        """``(fk(q), jacobian(q))`` in one pass."""
        kernel = self._kernel_fj
        if kernel is None:
            target = self._program.frames[self.target]
            kernel = self._kernel_fj = chain_kernels.jacobian_kernel(self._program, target)
        return self._call(kernel, q)

    def link_poses(self, q: npt.ArrayLike | Mapping[str, object]) -> dict[str, Array]:
        """Pose (4, 4) in the source frame of every link on the chain (source and target too)."""
        kernel = self._kernel_links
        if kernel is None:
            frames = [self._program.frames[link] for link in self.links]
            kernel = chain_kernels.pose_kernel(self._program, frames, stacked=True)
            self._kernel_links = kernel
        return dict(zip(self.links, self._call(kernel, q), strict=True))

    def jacobian_at(self, link: str, q: npt.ArrayLike | Mapping[str, object]) -> Array:
        """Jacobian (6, dof) of a link on the chain, at its origin (later joints: zero columns).

        Raises:
            UnknownLink: ``link`` is not on this chain (``role`` is ``"link"``).
        """
        kernel = self._kernels_at.get(link)
        if kernel is None:
            if link not in self._program.frames:
                raise UnknownLink(link, "link", self.links)
            frame = self._program.frames[link]
            kernel = self._kernels_at[link] = chain_kernels.jacobian_kernel(self._program, frame)
        return self._call(kernel, q)[1]

    def fk_batch(self, q: npt.ArrayLike) -> Array:
        """Poses (B, 4, 4) of the target for configurations ``q`` (B, dof), vectorised."""
        return self.fk_jacobian_batch(q, with_jacobian=False)[0]

    def fk_jacobian_batch(
        self, q: npt.ArrayLike, *, with_jacobian: bool = True
    ) -> tuple[Array, Array]:
        """Poses (B, 4, 4) and Jacobians (B, 6, dof) for configurations ``q`` (B, dof)."""
        qb = np.asarray(q, dtype=np.float64)
        if qb.ndim != 2 or qb.shape[1] != self.dof:
            raise ValueError(f"{self!r} needs q of shape (B, {self.dof}), got {qb.shape}")
        p = self._program
        batch = qb.shape[0]
        if p.size == 0:
            t = np.broadcast_to(p.frames[self.target][1], (batch, 4, 4)).copy()
            return t, np.zeros((batch, 6, self.dof))
        w = self._running(qb)
        t = program.frame_pose(p, w, self.target)  # (4, 4, B)
        poses = np.ascontiguousarray(t.transpose(2, 0, 1))
        if not with_jacobian:
            return poses, np.zeros((batch, 6, 0))
        jac = program.jacobian(p, w, t[:3, 3])  # (6, dof, B)
        return poses, np.ascontiguousarray(jac.transpose(2, 0, 1))
