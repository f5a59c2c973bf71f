"""``MujocoBody``: the robot's body in MuJoCo, moved by servo torques.

The seam between the servo model and the physics: each servo is an entry of a
:class:`ServoMount` (the joint it drives and the shaft <-> joint conversion, as in
:class:`~hilbot.hal.mapping.ServoSpec`); the body takes shaft torques, steps MuJoCo
by one fixed step and gives back the shaft positions and velocities. Several servos
may drive one joint (shadows): their torques add.

    body = MujocoBody.build(robot, mounts, scene=scene)
    q, v = body.shaft_state()
    body.step(torques)          # (n,) shaft torques [N·m] -> one step of body.timestep

Imports ``mujoco`` (the ``mujoco`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
from numpy.typing import NDArray

from hilbot.hal.errors import ConfigError
from hilbot.kinematics import Robot
from hilbot.sim.mujoco_model import TIMESTEP, JointDrive, mjcf
from hilbot.sim.mujoco_scene import SceneObject
from hilbot.sim.servo_physics import ServoPhysics

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class ServoMount:
    """One servo of the body: ``joint = offset + direction * shaft / gear_ratio``.

    Attributes:
        joint: URDF joint it drives.
        physics: its dynamics parameters (rotor inertia, friction, range).
        offset: joint position at the center tick [rad or m].
        direction: +1 or -1.
        gear_ratio: servo radians per joint radian (or per metre).
    """

    joint: str
    physics: ServoPhysics
    offset: float = 0.0
    direction: int = 1
    gear_ratio: float = 1.0


class MujocoBody:
    """A compiled MuJoCo model of the robot with servos at its joints.

    Args:
        model: the compiled model.
        mounts: the servos, in the servo model's order.
    """

    def __init__(self, model: mujoco.MjModel, mounts: Sequence[ServoMount]) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.mounts = tuple(mounts)
        self.timestep = float(model.opt.timestep)
        qadr, dadr = [], []
        for m in mounts:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, m.joint)
            if jid < 0:
                raise ConfigError(f"the MuJoCo model has no joint {m.joint!r}", field="joint")
            qadr.append(int(model.jnt_qposadr[jid]))
            dadr.append(int(model.jnt_dofadr[jid]))
        self._qadr = np.array(qadr, dtype=np.intp)
        self._dadr = np.array(dadr, dtype=np.intp)
        self._offset = np.array([m.offset for m in mounts], dtype=np.float64)
        # shaft = (joint - offset) * to_shaft; joint torque = shaft torque * to_shaft
        self._to_shaft = np.array([m.direction * m.gear_ratio for m in mounts], dtype=np.float64)
        self.steps = 0

    @classmethod
    def build(
        cls,
        robot: Robot,
        mounts: Sequence[ServoMount],
        *,
        scene: Sequence[SceneObject] = (),
        home: Mapping[str, float] | None = None,
        timestep: float = TIMESTEP,
    ) -> MujocoBody:
        """Compile ``robot`` with ``mounts`` and ``scene``; the body rests at ``home``.

        Raises:
            ConfigError: a joint the model cannot take, or MuJoCo refuses the model.
        """
        xml = mjcf(robot, _drives(mounts), scene=scene, home=home, timestep=timestep)
        try:
            model = mujoco.MjModel.from_xml_string(xml)
        except ValueError as exc:
            raise ConfigError(f"MuJoCo cannot compile the robot model: {exc}") from None
        body = cls(model, mounts)
        body.set_joint_positions(dict(home or {}))
        return body

    def set_joint_positions(self, positions: Mapping[str, float]) -> None:
        """Place joints [rad or m] (others stay), at rest; mimic followers follow."""
        m, d = self.model, self.data
        for name, value in positions.items():
            jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid >= 0:
                d.qpos[m.jnt_qposadr[jid]] = value
        for k in range(m.neq):  # joint equalities: joint1 = polycoef(joint2)
            if m.eq_type[k] == mujoco.mjtEq.mjEQ_JOINT:
                follower, leader = m.eq_obj1id[k], m.eq_obj2id[k]
                c = m.eq_data[k]
                d.qpos[m.jnt_qposadr[follower]] = c[0] + c[1] * d.qpos[m.jnt_qposadr[leader]]
        d.qvel[:] = 0.0
        mujoco.mj_forward(m, d)

    def set_shaft_positions(self, shaft: F64) -> None:
        """Place the servo joints at shaft angles (n,) [rad], at rest."""
        joint = self._offset + np.asarray(shaft, dtype=np.float64) / self._to_shaft
        self.set_joint_positions(
            {mount.joint: float(q) for mount, q in zip(self.mounts, joint, strict=True)}
        )

    def shaft_state(self) -> tuple[F64, F64]:
        """Shaft positions and velocities (n,) [rad], [rad/s] of the servos."""
        q = (self.data.qpos[self._qadr] - self._offset) * self._to_shaft
        v = self.data.qvel[self._dadr] * self._to_shaft
        return q, v

    def step(self, torque: F64) -> None:
        """Apply shaft torques (n,) [N·m] and advance one fixed step."""
        d = self.data
        d.qfrc_applied[self._dadr] = 0.0
        np.add.at(d.qfrc_applied, self._dadr, torque * self._to_shaft)
        mujoco.mj_step(self.model, d)
        self.steps += 1

    def joint_positions(self) -> dict[str, float]:
        """Every joint's position [rad or m] by name (servo-driven or not)."""
        m, d = self.model, self.data
        out = {}
        for jid in range(m.njnt):
            if m.jnt_type[jid] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
                out[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, jid)] = float(
                    d.qpos[m.jnt_qposadr[jid]]
                )
        return out

    def body_position(self, name: str) -> F64:
        """World position (3,) [m] of body ``name`` (a scene object, a link)."""
        bid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if bid < 0:
            raise KeyError(f"no body {name!r} in the MuJoCo model")
        return np.array(self.data.xpos[bid], dtype=np.float64)

    def free_bodies(self) -> dict[str, tuple[F64, F64]]:
        """World (position (3,), quaternion wxyz (4,)) of every free body (scene objects)."""
        m, d = self.model, self.data
        out = {}
        for jid in range(m.njnt):
            if m.jnt_type[jid] == mujoco.mjtJoint.mjJNT_FREE:
                bid = int(m.jnt_bodyid[jid])
                name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, bid)
                out[name] = (np.array(d.xpos[bid]), np.array(d.xquat[bid]))
        return out

    def contacts(self, geom: str) -> int:
        """How many active contacts involve geom ``name``."""
        gid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, geom)
        if gid < 0:
            raise KeyError(f"no geom {geom!r} in the MuJoCo model")
        d = self.data
        return sum(1 for c in d.contact[: d.ncon] if gid in (c.geom1, c.geom2))


def _drives(mounts: Sequence[ServoMount]) -> dict[str, JointDrive]:
    """Per joint: the servos' rotor inertia, drag and friction seen at the joint."""
    out: dict[str, JointDrive] = {}
    for m in mounts:
        g2 = m.gear_ratio**2
        p = m.physics
        lo = (
            m.offset
            + min(m.direction * p.min_position, m.direction * p.max_position) / m.gear_ratio
        )
        hi = (
            m.offset
            + max(m.direction * p.min_position, m.direction * p.max_position) / m.gear_ratio
        )
        old = out.get(m.joint)
        if old is None:
            out[m.joint] = JointDrive(
                p.inertia * g2, p.viscous * g2, p.friction * m.gear_ratio, (lo, hi)
            )
        else:
            out[m.joint] = JointDrive(
                old.armature + p.inertia * g2,
                old.damping + p.viscous * g2,
                old.frictionloss + p.friction * m.gear_ratio,
                (max(lo, old.range[0]), min(hi, old.range[1])),
            )
    return out
