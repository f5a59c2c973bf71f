"""URDF -> MuJoCo: the robot's kinematic tree compiled into an MJCF model at start.

The shipped URDFs carry kinematics only (no meshes, inertias or damping). The model
adds what a physics engine needs:

- a capsule from each link's origin to each child joint's origin (a sphere on a leaf
  link): visual and collision geometry, radius scaled to the robot's size;
- masses: where the maker publishes the robot's weight (``PUBLISHED_MASS``) it is spread
  over the links by geometry volume; elsewhere links have the density of a printed or
  aluminium arm with its servos (``DEFAULT_DENSITY``); inertias follow from the geoms;
- per servo joint: the servo's rotor inertia (armature), viscous drag (damping) and
  gearbox friction (frictionloss) reflected through the gear ratio, from
  :mod:`hilbot.sim.servo_physics` (the same numbers :class:`~hilbot.sim.SimBackend` uses);
- mimic joints as joint equality constraints; a movable joint no servo drives (the
  other arm when one bus of a bimanual robot is served) is welded at its home value;
- gravity, a floor below the robot and the scene objects (:mod:`hilbot.sim.mujoco_scene`).

The robot's geoms collide with the floor and scene objects, not with each other (the
capsules of neighbouring links overlap at the joints by construction).

Imports ``mujoco`` (the ``mujoco`` extra); nothing in the default install imports this.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

import numpy as np

from hilbot.hal.errors import ConfigError
from hilbot.kinematics import Robot
from hilbot.kinematics.joint import SCALAR_TYPES, JointType
from hilbot.sim.mujoco_scene import SceneObject

#: [kg] published total weight per robot name (URDF ``<robot name>``).
PUBLISHED_MASS = {
    # e-manual, OpenMANIPULATOR-X specification: "Weight 0.70 kg"
    # (https://emanual.robotis.com/docs/en/platform/openmanipulator_x/specification/)
    "open_manipulator_x": 0.70,
}
#: [kg/m³] links without published data: a capsule as dense as a hollow arm with servos.
DEFAULT_DENSITY = 1000.0
#: [s] fixed physics step; the servo loops (bandwidth 100 rad/s) are resolved at h·ω = 0.1.
TIMESTEP = 1e-3
#: Contact bits: robot geoms (2) touch the world (1), not each other.
_ROBOT_CONTYPE, _ROBOT_CONAFFINITY = 2, 1
_WORLD_CONTYPE, _WORLD_CONAFFINITY = 1, 3


@dataclass(frozen=True)
class JointDrive:
    """What a servo adds to the joint it drives, in joint units.

    Attributes:
        armature: reflected rotor inertia [kg·m² or kg].
        damping: viscous drag [N·m·s/rad or N·s/m].
        frictionloss: dry friction [N·m or N].
        range: (lower, upper) travel the servo allows [rad or m].
    """

    armature: float
    damping: float
    frictionloss: float
    range: tuple[float, float]


def mjcf(
    robot: Robot,
    drives: Mapping[str, JointDrive],
    *,
    scene: Sequence[SceneObject] = (),
    home: Mapping[str, float] | None = None,
    timestep: float = TIMESTEP,
) -> str:
    """The MJCF XML of ``robot`` with its servo ``drives`` and ``scene``.

    Raises:
        ConfigError: a joint type MuJoCo cannot take here (planar, floating), or a
            driven joint the URDF does not have.
    """
    for joint in drives:
        if joint not in robot.joints:
            raise ConfigError(f"the URDF has no joint {joint!r} for a servo", field="joint")
    radius = _radius(robot)
    volumes = _volumes(robot, radius)
    total = sum(volumes.values())
    published = PUBLISHED_MASS.get(robot.name)
    density = DEFAULT_DENSITY if published is None or total <= 0 else published / total
    parts = [
        f"<mujoco model={quoteattr(robot.name)}>",
        '<compiler angle="radian" autolimits="true"/>',
        f'<option timestep="{timestep!r}" gravity="0 0 -9.81" integrator="implicitfast"/>',
        '<visual><global offwidth="640" offheight="480"/></visual>',
        "<worldbody>",
        f'<geom name="floor" type="plane" size="2 2 0.01" pos="0 0 {_floor(robot, home):.6g}"'
        f' contype="{_WORLD_CONTYPE}" conaffinity="{_WORLD_CONAFFINITY}" rgba=".8 .8 .8 1"/>',
    ]
    parts += _link_geoms(robot, robot.root_link, radius, density)
    locked = _locked(robot, drives, home or {})
    for joint_name in robot.links[robot.root_link].child_joints:
        parts += _body(robot, joint_name, drives, radius, density, locked)
    parts += [_scene_body(o) for o in scene]
    parts.append("</worldbody>")
    parts += _equalities(robot, locked)
    parts.append("</mujoco>")
    return "\n".join(parts)


def _locked(
    robot: Robot, drives: Mapping[str, JointDrive], home: Mapping[str, float]
) -> dict[str, float]:
    """Movable joints no servo drives and no mimic moves: welded at their home value.

    A mimic follower of a welded joint is welded too, where its leader puts it.
    """
    locked = {
        name: float(home.get(name, 0.0))
        for name, joint in robot.joints.items()
        if joint.type in SCALAR_TYPES and joint.mimic is None and name not in drives
    }
    for name, joint in robot.joints.items():
        mimic = robot.leader(name) if joint.mimic is not None else None
        if mimic is not None and mimic.joint in locked:
            locked[name] = mimic.multiplier * locked[mimic.joint] + mimic.offset
    return locked


def _body(
    robot: Robot,
    joint_name: str,
    drives: Mapping[str, JointDrive],
    radius: float,
    density: float,
    locked: Mapping[str, float],
) -> list[str]:
    joint = robot.joints[joint_name]
    placement = joint.origin if joint_name not in locked else joint.motion(locked[joint_name])
    pos = placement[:3, 3]
    quat = _quat(placement[:3, :3])
    out = [f"<body name={quoteattr(joint.child)} pos={_vec(pos)} quat={_vec(quat)}>"]
    if joint_name not in locked:
        out += _joint(joint_name, robot, drives)
    out += _link_geoms(robot, joint.child, radius, density)
    for child in robot.links[joint.child].child_joints:
        out += _body(robot, child, drives, radius, density, locked)
    out.append("</body>")
    return out


def _joint(name: str, robot: Robot, drives: Mapping[str, JointDrive]) -> list[str]:
    joint = robot.joints[name]
    if joint.type is JointType.FIXED:
        return []
    if joint.type not in (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC):
        raise ConfigError(
            f"joint {name!r}: the MuJoCo backend takes revolute, continuous, prismatic and "
            f"fixed joints, not {joint.type.value}",
            field="urdf",
        )
    kind = "slide" if joint.type is JointType.PRISMATIC else "hinge"
    attrs = [f"name={quoteattr(name)}", f'type="{kind}"', f"axis={_vec(joint.axis)}"]
    lower, upper = joint.bounds()
    drive = drives.get(name)
    if drive is not None:
        lower, upper = max(lower, drive.range[0]), min(upper, drive.range[1])
        attrs += [
            f'armature="{drive.armature!r}"',
            f'damping="{drive.damping!r}"',
            f'frictionloss="{drive.frictionloss!r}"',
        ]
    if math.isfinite(lower) and math.isfinite(upper):
        attrs.append(f'range="{lower!r} {upper!r}"')
    return [f"<joint {' '.join(attrs)}/>"]


def _link_geoms(robot: Robot, link: str, radius: float, density: float) -> list[str]:
    common = (
        f'density="{density!r}" contype="{_ROBOT_CONTYPE}" conaffinity="{_ROBOT_CONAFFINITY}"'
        ' rgba=".25 .45 .85 1"'
    )
    out = []
    for k, (a, b) in enumerate(_segments(robot, link)):
        name = quoteattr(f"{link}_geom{k}")
        out.append(
            f'<geom name={name} type="capsule" fromto="{_xyz(a)} {_xyz(b)}" '
            f'size="{radius!r}" {common}/>'
        )
    if not out:
        out.append(
            f'<geom name={quoteattr(link + "_geom")} type="sphere" size="{radius!r}" {common}/>'
        )
    return out


def _segments(robot: Robot, link: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Capsule axes of ``link``: its origin to each child joint origin longer than 1 mm."""
    out = []
    for child in robot.links[link].child_joints:
        end = robot.joints[child].origin[:3, 3]
        if float(np.linalg.norm(end)) > 1e-3:
            out.append((np.zeros(3), end))
    return out


def _radius(robot: Robot) -> float:
    lengths = [
        float(np.linalg.norm(j.origin[:3, 3]))
        for j in robot.joints.values()
        if float(np.linalg.norm(j.origin[:3, 3])) > 1e-3
    ]
    scale = float(np.median(lengths)) if lengths else 0.1
    return min(max(0.15 * scale, 0.006), 0.04)


def _volumes(robot: Robot, radius: float) -> dict[str, float]:
    sphere = 4.0 / 3.0 * math.pi * radius**3
    out = {}
    for link in robot.links:
        if link == robot.root_link:
            continue  # fixed to the world: its mass does not matter
        segs = _segments(robot, link)
        out[link] = (
            sum(math.pi * radius**2 * float(np.linalg.norm(b - a)) + sphere for a, b in segs)
            if segs
            else sphere
        )
    return out


def _floor(robot: Robot, home: Mapping[str, float] | None) -> float:
    """Floor height: the root's z, or below the lowest link at zero or home pose."""
    lowest = 0.0
    for positions in ({}, dict(home or {})):
        poses = robot.fk({j: v for j, v in positions.items() if j in robot.joints})
        lowest = min(lowest, min(float(p[2, 3]) for p in poses.values()))
    return 0.0 if lowest >= -1e-9 else lowest - 0.1


def _scene_body(obj: SceneObject) -> str:
    size = " ".join(repr(s) for s in obj.size)
    geom = (
        f'<geom name={quoteattr(obj.name)} type="{obj.shape}" size="{size}" '
        f'friction="{obj.friction!r} 0.005 0.0001" rgba={_vec(obj.rgba)} '
        f'contype="{_WORLD_CONTYPE}" conaffinity="{_WORLD_CONAFFINITY}"'
    )
    if obj.mass <= 0:
        return f"{geom} pos={_vec(obj.pos)}/>"
    return (
        f"<body name={quoteattr(obj.name)} pos={_vec(obj.pos)}><freejoint/>"
        f'{geom} mass="{obj.mass!r}"/></body>'
    )


def _equalities(robot: Robot, locked: Mapping[str, float]) -> list[str]:
    rows = []
    for name, joint in robot.joints.items():
        mimic = joint.mimic
        if mimic is None or joint.type is JointType.FIXED or name in locked:
            continue
        rows.append(
            f"<joint joint1={quoteattr(name)} joint2={quoteattr(mimic.joint)} "
            f'polycoef="{mimic.offset!r} {mimic.multiplier!r} 0 0 0"/>'
        )
    return ["<equality>", *rows, "</equality>"] if rows else []


def _quat(rotation: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix (Shepperd's method)."""
    m = rotation
    trace = float(m[0, 0] + m[1, 1] + m[2, 2])
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    return np.array(q, dtype=np.float64)


def _xyz(v: np.ndarray) -> str:
    return " ".join(repr(float(x)) for x in v)


def _vec(v: Sequence[float] | np.ndarray) -> str:
    return quoteattr(" ".join(repr(float(x)) for x in v))
