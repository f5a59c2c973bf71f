"""Errors of the kinematics core.

The tree::

    KinematicsError
    ├── UrdfError          (.element, .name, .problem)   a URDF that cannot describe a robot
    ├── UnknownLink        (.link, .role, .known)        source or target link not in the robot
    ├── UnknownJoint       (.joint, .known)              a joint name not in the robot (a KeyError)
    └── NotAnAncestor      (.source, .target, .common_ancestor)

Warnings (``warnings.warn``; a ``UserWarning``)::

    KinematicsWarning
    └── MimicIgnored       (.joint, .leader, .reason)     a <mimic> the model cannot honour
"""

from __future__ import annotations

from collections.abc import Iterable


class KinematicsError(Exception):
    """Root of every error raised by ``hilbot.kinematics``."""


class UrdfError(KinematicsError, ValueError):
    """A URDF document is malformed or does not describe a tree of links.

    Attributes:
        element: The XML tag at fault (``"joint"``, ``"link"``, ``"limit"``, ``"robot"`` ...).
        name: The ``name`` of the element (or of its joint/link) if it has one, else ``None``.
        problem: What is wrong, in words.
    """

    def __init__(self, element: str, name: str | None, problem: str) -> None:
        self.element = element
        self.name = name
        self.problem = problem
        where = f"<{element}>" if name is None else f"<{element} name={name!r}>"
        super().__init__(f"URDF {where}: {problem}")


def _listing(names: Iterable[str], limit: int = 12) -> str:
    names = sorted(names)
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


class UnknownLink(KinematicsError, LookupError):
    """A link name that the robot does not have.

    Attributes:
        link: The name asked for.
        role: ``"source"`` or ``"target"`` (or ``"link"`` outside of a chain request).
        known: The links the robot does have.
    """

    def __init__(self, link: str, role: str, known: Iterable[str] = ()) -> None:
        self.link = link
        self.role = role
        self.known = tuple(sorted(known))
        super().__init__(
            f"unknown {role} link {link!r}; the robot has links: {_listing(self.known)}"
        )


class UnknownJoint(KinematicsError, KeyError):
    """A joint name that the robot (or a chain) does not have.

    Attributes:
        joint: The name asked for.
        known: The joints that exist where it was looked up.
    """

    def __init__(self, joint: str, known: Iterable[str] = ()) -> None:
        self.joint = joint
        self.known = tuple(sorted(known))
        super().__init__(joint)

    def __str__(self) -> str:
        return f"unknown joint {self.joint!r}; known joints: {_listing(self.known)}"


class NotAnAncestor(KinematicsError, ValueError):
    """The source link of a chain is not an ancestor of its target link.

    Attributes:
        source: The requested source link.
        target: The requested target link.
        common_ancestor: The nearest link that is an ancestor of both; a chain from it to
            either link exists.
    """

    def __init__(self, source: str, target: str, common_ancestor: str) -> None:
        self.source = source
        self.target = target
        self.common_ancestor = common_ancestor
        super().__init__(
            f"link {source!r} is not an ancestor of {target!r} (their nearest common "
            f"ancestor is {common_ancestor!r}): a chain runs from a link to one of its "
            f"descendants; use source_link={common_ancestor!r} or swap source and target"
        )


class KinematicsWarning(UserWarning):
    """Root of every warning issued by ``hilbot.kinematics``."""


class MimicIgnored(KinematicsWarning):
    """A ``<mimic>`` was ignored while loading: the joint moves (or stays) on its own.

    Pinocchio loads such files the same way. ``load_urdf(..., strict_mimic=True)``
    refuses them with a ``UrdfError`` instead.

    Attributes:
        joint: The joint that carries the ``<mimic>``.
        leader: The joint its ``<mimic>`` names.
        reason: Why it cannot be honoured, in words.
    """

    def __init__(self, joint: str, leader: str, reason: str) -> None:
        self.joint = joint
        self.leader = leader
        self.reason = reason
        super().__init__(
            f"URDF <mimic> of joint {joint!r} (mimics {leader!r}) ignored: {reason}; "
            "pass strict_mimic=True to refuse such a file"
        )
