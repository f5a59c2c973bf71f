"""The robot model: a tree of links joined by joints, with forward kinematics of every link."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray

from hilbot.kinematics.chain import Chain
from hilbot.kinematics.errors import (
    MimicIgnored,
    NotAnAncestor,
    UnknownJoint,
    UnknownLink,
    UrdfError,
)
from hilbot.kinematics.joint import SCALAR_TYPES, Joint, JointType, Link, Mimic, coordinates

Array = NDArray[np.float64]


class Robot:
    """A kinematic tree loaded from URDF (see :func:`hilbot.kinematics.load_urdf`).

    Args:
        name: Robot name.
        links: Link names.
        joints: Joints in URDF order.
        strict_mimic: Refuse a ``<mimic>`` the model cannot honour (on a fixed joint, or
            naming a joint that is missing or fixed) instead of ignoring it with a
            :class:`~hilbot.kinematics.errors.MimicIgnored` warning.

    Raises:
        UrdfError: The links and joints do not form one tree, or a mimic tag is invalid.
    """

    def __init__(
        self,
        name: str,
        links: Iterable[str],
        joints: Iterable[Joint],
        *,
        strict_mimic: bool = False,
    ) -> None:
        self.name = name
        joint_list = _honoured_mimics(list(joints), strict_mimic)
        link_names = list(links)
        self._joints = {j.name: j for j in joint_list}
        self.root_link, self._order = _check_tree(link_names, joint_list)
        children: dict[str, list[str]] = {name: [] for name in link_names}
        parent_joint: dict[str, str] = {}
        for j in joint_list:
            children[j.parent].append(j.name)
            parent_joint[j.child] = j.name
        self._links = {
            name: Link(name, parent_joint.get(name), tuple(children[name])) for name in link_names
        }
        self._leaders = _resolve_mimics(self._joints)
        self._chains: dict[tuple[str, str], Chain] = {}
        self.movable_joints: tuple[str, ...] = tuple(j.name for j in joint_list if j.dof > 0)

    def __repr__(self) -> str:
        return (
            f"Robot({self.name!r}, root={self.root_link!r}, links={len(self._links)}, "
            f"joints={len(self._joints)}, movable={len(self.movable_joints)})"
        )

    @property
    def links(self) -> Mapping[str, Link]:
        """Links by name, in URDF order."""
        return MappingProxyType(self._links)

    @property
    def joints(self) -> Mapping[str, Joint]:
        """All joints (fixed and mimic too) by name, in URDF order."""
        return MappingProxyType(self._joints)

    def joint(self, name: str) -> Joint:
        """Return the joint ``name``; raises :class:`UnknownJoint` if there is none."""
        try:
            return self._joints[name]
        except KeyError:
            raise UnknownJoint(name, self._joints) from None

    def limits(self, joint: str) -> tuple[float, float]:
        """Position bounds ``(lower, upper)`` of a joint (infinite where unbounded)."""
        return self.joint(joint).bounds()

    def leader(self, joint: str) -> Mimic | None:
        """For a mimic follower, its ultimate leader: ``value = multiplier * leader + offset``.

        Chains of mimics are composed into one. ``None`` for a joint that mimics nothing.
        """
        self.joint(joint)
        return self._leaders.get(joint)

    def parent_link(self, link: str) -> str | None:
        """The parent link of ``link`` (``None`` for the root)."""
        joint = self._link(link, "link").parent_joint
        return None if joint is None else self._joints[joint].parent

    def ancestors(self, link: str) -> list[str]:
        """``link`` and its ancestors, from ``link`` up to the root."""
        out = [link]
        parent = self.parent_link(link)
        while parent is not None:
            out.append(parent)
            parent = self.parent_link(parent)
        return out

    def path_joints(self, source_link: str, target_link: str) -> list[Joint]:
        """Joints from ``source_link`` down to ``target_link``, in order.

        Raises:
            UnknownLink: Either link does not exist (``role`` says which).
            NotAnAncestor: ``source_link`` is not an ancestor of ``target_link``.
        """
        self._link(source_link, "source")
        up = self.ancestors(self._link(target_link, "target").name)
        if source_link not in up:
            common = next(a for a in self.ancestors(source_link) if a in up)
            raise NotAnAncestor(source_link, target_link, common)
        path = up[: up.index(source_link)]
        return [self._joints[self._links[link].parent_joint or ""] for link in reversed(path)]

    def path_between(self, source_link: str, target_link: str) -> Chain:
        """The chain from ``source_link`` to its descendant ``target_link`` (memoised).

        Raises:
            UnknownLink: Either link does not exist (``role`` says which).
            NotAnAncestor: ``source_link`` is not an ancestor of ``target_link``.
        """
        key = (source_link, target_link)
        chain = self._chains.get(key)
        if chain is None:
            chain = self._chains[key] = Chain(self, source_link, target_link)
        return chain

    def fk(self, positions: Mapping[str, object] | None = None) -> dict[str, Array]:
        """Poses (4, 4) of every link in the root link's frame.

        Args:
            positions: Joint name -> configuration (a float, or for planar and floating
                joints a pose in any form :func:`hilbot.kinematics.joint.coordinates`
                accepts). Missing joints are at zero (identity); mimic followers follow
                their leaders (a value given for a follower is ignored).

        Raises:
            UnknownJoint: ``positions`` names a joint the robot does not have.
        """
        given = dict(positions or {})
        for name in given:
            if name not in self._joints:
                raise UnknownJoint(name, self._joints)
        poses = {self.root_link: np.eye(4)}
        for joint in self._order:
            mimic = self._leaders.get(joint.name)
            value: object
            if mimic is not None:
                lead = given.get(mimic.joint, 0.0)  # in any form the leader itself accepts
                lead_value = float(coordinates(self._joints[mimic.joint], lead)[0])
                value = mimic.multiplier * lead_value + mimic.offset
            elif joint.type is JointType.FIXED or joint.name not in given:
                value = np.zeros(joint.type.dof)
            else:
                value = coordinates(joint, given[joint.name])
            poses[joint.child] = poses[joint.parent] @ joint.motion(value)
        return {name: poses[name] for name in self._links}

    def _link(self, name: str, role: str) -> Link:
        try:
            return self._links[name]
        except KeyError:
            raise UnknownLink(name, role, self._links) from None


def _check_tree(links: list[str], joints: list[Joint]) -> tuple[str, list[Joint]]:
    """Validate that the joints make the links one tree; return the root and a joint order."""
    if not links:
        raise UrdfError("robot", None, "has no <link>")
    known = set(links)
    parent_of: dict[str, Joint] = {}
    for j in joints:
        for role, link in (("parent", j.parent), ("child", j.child)):
            if link not in known:
                raise UrdfError("joint", j.name, f"{role} link {link!r} is not defined")
        if j.child in parent_of:
            other = parent_of[j.child].name
            raise UrdfError(
                "link", j.child, f"is the child of two joints, {other!r} and {j.name!r}"
            )
        parent_of[j.child] = j
    roots = [name for name in links if name not in parent_of]
    if len(roots) > 1:
        raise UrdfError("robot", None, f"more than one root link: {roots}")
    if not roots:
        raise UrdfError("robot", None, f"no root link: the joints form a cycle through {links}")
    children: dict[str, list[Joint]] = {name: [] for name in links}
    for j in joints:
        children[j.parent].append(j)
    order: list[Joint] = []
    stack = [roots[0]]
    while stack:
        for j in reversed(children[stack.pop()]):
            order.append(j)
            stack.append(j.child)
    if len(order) != len(joints):
        cycle = sorted({j.child for j in joints} - {j.child for j in order})
        raise UrdfError("robot", None, f"the joints form a cycle through links {cycle}")
    return roots[0], order


def _honoured_mimics(joints: list[Joint], strict: bool) -> list[Joint]:
    """The joints with every ``<mimic>`` the model cannot honour dropped (warned) or refused.

    Such a mimic sits on a fixed joint (which never moves), or names a joint the robot
    does not have or a fixed one (nothing to follow). Pinocchio loads these files by
    ignoring the mimic, so do we: the joint keeps its own type and coordinates.
    """
    by_name = {j.name: j for j in joints}
    out = []
    for j in joints:
        reason = None if j.mimic is None else _unusable(j, by_name.get(j.mimic.joint))
        if reason is not None:
            assert j.mimic is not None
            if strict:
                raise UrdfError("mimic", j.name, reason)
            warnings.warn(MimicIgnored(j.name, j.mimic.joint, reason), stacklevel=2)
            j = dataclasses.replace(j, mimic=None)
        out.append(j)
    return out


def _unusable(joint: Joint, leader: Joint | None) -> str | None:
    """Why ``joint``'s mimic cannot be honoured, or ``None`` if it can."""
    assert joint.mimic is not None
    if joint.type is JointType.FIXED:
        return "the joint is fixed (it never moves)"
    if leader is None:
        return f"mimics unknown joint {joint.mimic.joint!r}"
    if leader.type is JointType.FIXED:
        return f"joint {leader.name!r} is fixed, so there is nothing to follow"
    return None


def _resolve_mimics(joints: dict[str, Joint]) -> dict[str, Mimic]:
    """Compose mimic chains into ``follower -> Mimic(ultimate leader, multiplier, offset)``."""
    out: dict[str, Mimic] = {}
    for j in joints.values():
        if j.mimic is None:
            continue
        leader = joints[j.mimic.joint]  # ``_honoured_mimics`` dropped unknown leaders
        for joint in (j, leader):
            if joint.type not in SCALAR_TYPES:
                raise UrdfError(
                    "mimic",
                    j.name,
                    f"joint {joint.name!r} is {joint.type.value}; mimic needs "
                    "revolute, continuous or prismatic joints",
                )
        multiplier, offset, seen = 1.0, 0.0, [j.name]
        current = j
        while current.mimic is not None:
            multiplier, offset = (
                multiplier * current.mimic.multiplier,
                multiplier * current.mimic.offset + offset,
            )
            current = joints[current.mimic.joint]
            if current.name in seen:
                raise UrdfError("mimic", j.name, f"mimic joints form a cycle: {seen}")
            seen.append(current.name)
        out[j.name] = Mimic(current.name, multiplier, offset)
    return out
