"""The joints of one robot subtree as one flat variable vector, for the multi-task solver.

``TreeModel`` gathers every chain from a root link to the links of its subtree and
maps each chain's columns into one global column order, so tasks on several links
(both hands, six feet) share one ``dq``. A floating joint on the way (the hexapod's
``base_floating`` when the root is ``world``) becomes six shared columns: the base
is free. Rooting the model below it (``base_link``) fixes the base.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics import spatial
from hilbot.kinematics.errors import KinematicsError
from hilbot.kinematics.ik.core.chain_info import check_positions
from hilbot.kinematics.joint import JointType, coordinates

Array = NDArray[np.float64]
_SCALAR = (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC)


class TreeModel:
    """The movable joints under ``root`` as one flat configuration (see the module docstring).

    Attributes:
        robot: the robot.
        root: the root link every pose and Jacobian is expressed in.
        nv: number of columns.
        names: (nv,) joint name of each column.
        lower: (nv,) lower limits; ``upper`` and ``velocity_limit`` likewise.
    """

    def __init__(self, robot: Any, root: str, chains: list[Any] | None = None) -> None:
        self.robot = robot
        self.root = root
        if chains is None:
            chains = _subtree_chains(robot, root)
        columns: list[tuple[str, int]] = []
        index: dict[tuple[str, int], int] = {}
        lower: list[float] = []
        upper: list[float] = []
        velocity: list[float] = []
        joints: dict[str, Any] = {}
        self._chains: dict[str, tuple[Any, NDArray[np.intp]]] = {}
        for chain in chains:
            for c, column in enumerate(chain.jacobian_columns):
                if column not in index:
                    index[column] = len(columns)
                    columns.append(column)
                    lower.append(float(chain.lower[c]))
                    upper.append(float(chain.upper[c]))
                    velocity.append(float(chain.velocity_limit[c]))
            for joint in chain.joints:
                joints[joint.name] = joint
        for chain in chains:
            cols = np.array([index[c] for c in chain.jacobian_columns], dtype=np.intp)
            for link in chain.links:
                if link not in self._chains or len(chain.links) < len(self._chains[link][0].links):
                    self._chains[link] = (chain, cols)
        self.columns = tuple(columns)
        self.nv = len(columns)
        self.names = tuple(name for name, _ in columns)
        self.lower = np.array(lower)
        self.upper = np.array(upper)
        self.velocity_limit = np.array(velocity)
        self.joints = joints  # name -> Joint, in column order
        self._start = {name: self.names.index(name) for name in joints}
        self._floating = [self._start[n] for n, j in joints.items() if j.type is JointType.FLOATING]
        self.scalar = not self._floating

    @classmethod
    def from_chain(cls, chain: Any) -> TreeModel:
        """A model over exactly one chain's columns (same order as the chain)."""
        return cls(chain.robot, chain.source, [chain])

    def chain(self, link: str) -> tuple[Any, NDArray[np.intp]]:
        """The chain from the root to ``link`` and its columns in the model.

        Raises:
            UnknownLink: no such link.
            NotAnAncestor: ``link`` is not below the root (pick ``root_link`` higher up).
        """
        found = self._chains.get(link)
        if found is None:
            chain = self._chain_to(link)
            cols = np.array([self.columns.index(c) for c in chain.jacobian_columns], np.intp)
            found = (chain, cols)
            self._chains[link] = found
        return found

    def _chain_to(self, link: str) -> Any:
        """The chain root -> ``link``; ``UnknownLink`` / ``NotAnAncestor`` propagate as is."""
        chain = self.robot.path_between(self.root, link)
        outside = [c for c in chain.jacobian_columns if c not in self.columns]
        if outside:
            raise KinematicsError(
                f"link {link!r} moves with joints {sorted({n for n, _ in outside})} that are "
                f"not below the root {self.root!r}"
            )
        return chain

    # --- configurations ------------------------------------------------------------------

    def read(self, value: Any) -> tuple[Array, Mapping[str, Any]]:
        """Flat (nv,) configuration and the base mapping from a state, mapping or array.

        Raises:
            ValueError: a flat array of the wrong shape.
            KeyError: a mapping or state misses a model joint (the message lists them).
            InvalidPositions: a coordinate is NaN, infinite or beyond ``MAX_POSITION``.
            TypeError: anything else.
        """
        if isinstance(value, np.ndarray):
            q = np.asarray(value, dtype=np.float64)
            if q.shape != (self.nv,):
                raise ValueError(
                    f"a flat configuration needs shape ({self.nv},) in the columns "
                    f"{list(self.names)}, got {q.shape}"
                )
            check_positions(q, self.names)
            return q.copy(), {}
        if not isinstance(value, Mapping):
            names = getattr(value, "names", None)
            position = getattr(value, "position", None)
            if names is None or position is None:
                raise TypeError(
                    "state_or_positions must be a joint state (.names, .position), a mapping "
                    f"joint -> position or a flat (nv,) array, got {type(value).__name__}"
                )
            value = dict(zip(names, np.asarray(position, dtype=np.float64).tolist(), strict=True))
        missing = [name for name in self.joints if name not in value]
        if missing:
            raise KeyError(f"no position for the joints {missing}")
        q = np.zeros(self.nv)
        for name, joint in self.joints.items():
            c = self._start[name]
            q[c : c + joint.type.dof] = coordinates(joint, value[name])
        check_positions(q, self.names)
        return q, value

    def to_dict(self, q: Array) -> dict[str, Any]:
        """Joint name -> position (a float; an array for planar and floating joints)."""
        out: dict[str, Any] = {}
        for name, joint in self.joints.items():
            c = self._start[name]
            n = joint.type.dof
            out[name] = float(q[c]) if n == 1 else q[c : c + n].copy()
        return out

    def integrate(self, q: Array, dq: Array) -> Array:
        """Move ``q`` by the tangent ``dq`` (floating joints move in their child frame)."""
        out = q + dq
        for c in self._floating:
            rot = spatial.so3_exp(q[c + 3 : c + 6])
            out[c : c + 3] = q[c : c + 3] + rot @ dq[c : c + 3]
            out[c + 3 : c + 6] = spatial.so3_log(rot @ spatial.so3_exp(dq[c + 3 : c + 6]))
        return out

    def base_point(self, link: str, q: Array) -> Array:
        """Position (root frame) of the first scalar joint on the way to ``link``.

        This is where ``max_reach`` is measured from (the shoulder of an arm, the
        hip of a leg).
        """
        chain, cols = self.chain(link)
        for joint in chain.path:
            if joint.type in _SCALAR:
                pose: Array = chain.link_poses(q[cols])[joint.child]
                return pose[:3, 3].copy()
        return np.asarray(chain.fk(q[cols])[:3, 3], dtype=np.float64)


def _subtree_chains(robot: Any, root: str) -> list[Any]:
    """Chains from ``root`` to every leaf link below it (one per branch)."""
    below = [link for link in robot.links if link != root and root in robot.ancestors(link)]
    parents = {robot.parent_link(link) for link in below}
    leaves = [link for link in below if link not in parents]
    if root not in robot.links:
        raise KinematicsError(f"unknown root link {root!r}; links are {list(robot.links)}")
    return [robot.path_between(root, leaf) for leaf in leaves]


class TreeContext:
    """Poses and Jacobians of any link of a ``TreeModel`` at one configuration (cached).

    Implements ``LimitContext`` for the limits (configuration, velocity, collision).
    Poses of all links of a chain come from one ``link_poses`` pass; Jacobians are
    computed only for the links that need one.
    """

    __slots__ = (
        "_chain_poses",
        "_jacobians",
        "_poses",
        "lower",
        "model",
        "names",
        "q",
        "upper",
        "velocity_limit",
    )

    def __init__(self, model: TreeModel, q: Array) -> None:
        self.model = model
        self.q = q
        self.lower = model.lower
        self.upper = model.upper
        self.velocity_limit = model.velocity_limit
        self.names = model.names
        self._poses: dict[str, Array] = {}
        self._jacobians: dict[str, Array] = {}
        self._chain_poses: dict[int, dict[str, Array]] = {}

    def frame(self, link: str) -> tuple[Array, Array]:
        """``(pose (4, 4), jacobian (6, nv))`` of ``link`` in the root frame."""
        return self.pose(link), self.jacobian(link)

    def pose(self, link: str) -> Array:
        """Pose (4, 4) of ``link`` in the root frame."""
        pose = self._poses.get(link)
        if pose is None:
            chain, cols = self.model.chain(link)
            if link == chain.target:
                self._target(link)
                return self._poses[link]
            poses = self._chain_poses.get(id(chain))
            if poses is None:
                poses = chain.link_poses(self.q[cols])
                self._chain_poses[id(chain)] = poses
            pose = poses[link]
            self._poses[link] = pose
        return pose

    def jacobian(self, link: str) -> Array:
        """Jacobian (6, nv) of ``link``'s origin in the root frame."""
        jac = self._jacobians.get(link)
        if jac is None:
            chain, cols = self.model.chain(link)
            if link == chain.target:
                self._target(link)
                return self._jacobians[link]
            jac = np.zeros((6, self.model.nv))
            jac[:, cols] = chain.jacobian_at(link, self.q[cols])
            self._jacobians[link] = jac
        return jac

    def _target(self, link: str) -> None:
        """Pose and Jacobian of a chain's target link in one pass."""
        chain, cols = self.model.chain(link)
        pose, jac_local = chain.fk_jacobian(self.q[cols])
        jac = np.zeros((6, self.model.nv))
        jac[:, cols] = jac_local
        self._poses[link] = pose
        self._jacobians[link] = jac
