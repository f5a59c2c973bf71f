"""Parse URDF (the joints, links, limits and mimic tags; geometry is ignored) with xml.etree."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from hilbot.kinematics import spatial
from hilbot.kinematics.errors import UrdfError
from hilbot.kinematics.joint import Joint, JointLimit, JointType, Mimic
from hilbot.kinematics.robot import Robot

_TYPES = {t.value: t for t in JointType}


def load_urdf(path_or_xml: str | os.PathLike[str], *, strict_mimic: bool = False) -> Robot:
    """Load a robot from a URDF file path, or from URDF text (a string starting with ``<``).

    A ``<mimic>`` the model cannot honour (on a fixed joint, or naming a joint that is
    missing or fixed) is ignored with a :class:`~hilbot.kinematics.errors.MimicIgnored`
    warning, as pinocchio does; ``strict_mimic=True`` refuses it with a ``UrdfError``.

    Raises:
        UrdfError: The document is not XML, or does not describe a valid tree of links
            (the error names the element and what is wrong).
        OSError: The file cannot be read.
    """
    if isinstance(path_or_xml, str) and path_or_xml.lstrip().startswith("<"):
        text = path_or_xml
    elif isinstance(path_or_xml, str) and not path_or_xml.strip():
        raise UrdfError("robot", None, "empty input: expected a URDF file path or URDF text")
    else:
        text = Path(path_or_xml).read_text(encoding="utf-8-sig")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise UrdfError("robot", None, f"not well-formed XML: {exc}") from exc
    return parse_robot(root, strict_mimic=strict_mimic)


def parse_robot(root: ET.Element, *, strict_mimic: bool = False) -> Robot:
    """Build a :class:`Robot` from a parsed ``<robot>`` (``strict_mimic``: see ``load_urdf``)."""
    if root.tag != "robot":
        raise UrdfError(root.tag, None, "the document element must be <robot>")
    links: list[str] = []
    for el in root.findall("link"):
        name = _name(el)
        if name in links:
            raise UrdfError("link", name, "duplicate link name")
        links.append(name)
    joints: list[Joint] = []
    seen: set[str] = set()
    for el in root.findall("joint"):
        joint = _joint(el)
        if joint.name in seen:
            raise UrdfError("joint", joint.name, "duplicate joint name")
        seen.add(joint.name)
        joints.append(joint)
    return Robot(root.get("name", ""), links, joints, strict_mimic=strict_mimic)


def _name(el: ET.Element) -> str:
    name = el.get("name")
    if not name:
        raise UrdfError(el.tag, None, "missing required attribute 'name'")
    return name


def _floats(text: str | None, count: int, tag: str, owner: str, attr: str) -> list[float]:
    if text is None:
        raise UrdfError(tag, owner, f"missing required attribute {attr!r}")
    parts = text.split()
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UrdfError(tag, owner, f"attribute {attr}={text!r} is not numeric") from None
    if len(values) != count:
        raise UrdfError(tag, owner, f"attribute {attr}={text!r} needs {count} numbers")
    if not all(math.isfinite(v) for v in values):
        raise UrdfError(tag, owner, f"attribute {attr}={text!r} must be finite")
    return values


def _float(el: ET.Element, attr: str, owner: str, default: float | None = None) -> float:
    text = el.get(attr)
    if text is None and default is not None:
        return default
    return _floats(text, 1, el.tag, owner, attr)[0]


def _link_ref(el: ET.Element, tag: str, name: str) -> str:
    ref = el.find(tag)
    if ref is None:
        raise UrdfError("joint", name, f"missing <{tag}> element")
    link = ref.get("link")
    if not link:
        raise UrdfError("joint", name, f"<{tag}> has no 'link' attribute")
    return link


def _joint(el: ET.Element) -> Joint:
    name = _name(el)
    type_text = el.get("type")
    if type_text is None:
        raise UrdfError("joint", name, "missing required attribute 'type'")
    kind = _TYPES.get(type_text)
    if kind is None:
        raise UrdfError(
            "joint", name, f"unknown joint type {type_text!r}; expected one of {sorted(_TYPES)}"
        )
    parent = _link_ref(el, "parent", name)
    child = _link_ref(el, "child", name)
    origin = np.eye(4)
    origin_el = el.find("origin")
    if origin_el is not None:
        xyz = _floats(origin_el.get("xyz", "0 0 0"), 3, "origin", name, "xyz")
        rpy = _floats(origin_el.get("rpy", "0 0 0"), 3, "origin", name, "rpy")
        origin = spatial.transform(spatial.rpy_to_matrix(rpy), xyz)
    axis = np.array([1.0, 0.0, 0.0])
    axis_el = el.find("axis")
    if axis_el is not None:
        axis = np.array(_floats(axis_el.get("xyz"), 3, "axis", name, "xyz"))
    norm = float(np.linalg.norm(axis))
    if norm < 1e-9 and kind not in (JointType.FIXED, JointType.FLOATING):
        raise UrdfError("axis", name, f"axis xyz={axis.tolist()} is zero")
    if norm >= 1e-9:
        axis = axis / norm
    return Joint(name, kind, parent, child, origin, axis, _limit(el, kind, name), _mimic(el, name))


def _limit(el: ET.Element, kind: JointType, name: str) -> JointLimit | None:
    limit_el = el.find("limit")
    if limit_el is None:
        if kind in (JointType.REVOLUTE, JointType.PRISMATIC):
            raise UrdfError("joint", name, f"a {kind.value} joint needs a <limit> element")
        return None
    lower = _float(limit_el, "lower", name, 0.0)
    upper = _float(limit_el, "upper", name, 0.0)
    # The URDF spec makes effort and velocity required; for joints without position limits
    # (continuous) we tolerate their absence (many published URDFs omit them) as unbounded.
    required = kind in (JointType.REVOLUTE, JointType.PRISMATIC)
    velocity = _float(limit_el, "velocity", name, None if required else math.inf)
    effort = _float(limit_el, "effort", name, None if required else math.inf)
    if lower > upper:
        raise UrdfError("limit", name, f"lower={lower} is greater than upper={upper}")
    if velocity < 0.0 or effort < 0.0:
        raise UrdfError("limit", name, "velocity and effort must not be negative")
    return JointLimit(lower, upper, velocity, effort)


def _mimic(el: ET.Element, name: str) -> Mimic | None:
    mimic_el = el.find("mimic")
    if mimic_el is None:
        return None
    leader = mimic_el.get("joint")
    if not leader:
        raise UrdfError("mimic", name, "missing required attribute 'joint'")
    return Mimic(
        leader, _float(mimic_el, "multiplier", name, 1.0), _float(mimic_el, "offset", name, 0.0)
    )
