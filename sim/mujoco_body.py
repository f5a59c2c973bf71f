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

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from hilbot.hal.errors import ConfigError
from hilbot.hal.mapping import ServoSpec
from hilbot.kinematics import Robot
from hilbot.sim.mujoco_model import TIMESTEP, JointDrive, mjcf
from hilbot.sim.mujoco_scene import SceneObject
from hilbot.sim.servo_model import SCALAR_MAX_SERVOS, ServoModel, _profile_one
from hilbot.sim.servo_physics import ServoPhysics
from hilbot.sim.sim_backend import SimBackend

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


# ------------------------------------------------------------------ mujoco_servos
# ``BodyServoModel``: hilbot's servo model with a MuJoCo body instead of its own inertia.
#: Longest gap stepped at once [s]; a longer stall (a debugger, a suspended host) skips
#: the rest, as the servo model's own sub-step cap stretches it.
MAX_GAP = 2.0


class BodyServoModel(ServoModel):
    """A :class:`ServoModel` whose shafts are the joints of a :class:`MujocoBody`.

    Args:
        physics: one entry per servo, in the body's mount order.
        body: the body; its servo joints are placed at ``initial_positions``.
        initial_positions: (n,) shaft angles [rad]; default the body's present state.
        ambient_temperature: [°C].
        voltage: initial input voltage [V].
    """

    def __init__(
        self,
        physics: Sequence[ServoPhysics],
        body: MujocoBody,
        *,
        initial_positions: npt.ArrayLike | None = None,
        ambient_temperature: float = 25.0,
        voltage: npt.ArrayLike | None = None,
    ) -> None:
        if len(body.mounts) != len(physics):
            raise ValueError(f"{len(physics)} servos but the body has {len(body.mounts)} mounts")
        if initial_positions is not None:
            body.set_shaft_positions(np.asarray(initial_positions, dtype=np.float64))
        q0, _ = body.shaft_state()
        super().__init__(
            physics, initial_positions=q0, ambient_temperature=ambient_temperature, voltage=voltage
        )
        self.body = body
        #: The body rests where it was placed (as if held) until torque is first enabled:
        #: a gravity-loaded arm would otherwise sag during start-up, before the runtime
        #: arms it, and then refuse to enable (its start pose out of the joint limits).
        self.held = True
        self._pending = 0.0  # [s] not yet stepped (less than one body step)
        self._pv = self._speed.tolist()

    def step(self, dt: float) -> None:
        """Advance by ``dt`` seconds in whole body steps (``dt <= 0`` does nothing)."""
        if not dt > 0:
            return
        self._flush_heat()
        if self.held and not self.torque_enabled.any():
            self._heat(dt)
            return
        self.held = False
        h = self.body.timestep
        self._pending += min(dt, MAX_GAP)
        count = math.floor(self._pending / h + 1e-9)
        if count <= 0:
            return
        self._pending = max(0.0, self._pending - count * h)
        for _ in range(count):
            self._step_body(h)
        elapsed = count * h
        if self.n <= SCALAR_MAX_SERVOS:
            self._heat_and_errors_floats(elapsed)
        else:
            self._heat(elapsed)
            self._update_errors(elapsed)
        self._resting = None

    def at_rest(self) -> bool:
        """Never: gravity and contacts act on the body at every step."""
        return False

    def _step_body(self, h: float) -> None:
        body = self.body
        q, v = body.shaft_state()
        on = self.torque_enabled.tolist()
        goal, pv, pa = self.goal, self.profile_velocity, self.profile_acceleration
        r, rv = self.reference, self.reference_velocity
        tau = np.zeros(self.n)
        caps = self.torque_limit.tolist()  # Goal Current in current-based position mode
        for i in range(self.n):
            if not on[i]:
                r[i], rv[i] = q[i], 0.0
                continue
            ri, rvi = _profile_one(h, goal[i], r[i], rv[i], self._pv[i], pv[i], pa[i])
            r[i], rv[i] = ri, rvi
            _, _, _, stall, speed, kp, kd = self._floats[i]
            t = kp * (ri - q[i]) + kd * (rvi - v[i])
            # Torque-speed curve: less torque available in the direction of motion.
            x = 1.0 - (1.0 if t > 0.0 else -1.0 if t < 0.0 else 0.0) * v[i] / speed
            limit = min(stall * (0.0 if x < 0.0 else 1.0 if x > 1.0 else x), caps[i])
            tau[i] = -limit if t < -limit else limit if t > limit else t
        load = self.external_torque
        if self.load_function is not None:
            load = load + np.asarray(self.load_function(q), dtype=np.float64)
        body.step(tau + load)
        self.position, self.velocity = body.shaft_state()
        self.motor_torque = tau


# ------------------------------------------------------------------ mujoco_bus
# A MuJoCo body behind a virtual bus: the model factory ``VirtualBus`` takes.
def body_model_factory(
    robot: Robot,
    servos: Sequence[ServoSpec],
    *,
    scene: Sequence[SceneObject] = (),
    home: Mapping[str, float] | None = None,
) -> Callable[..., BodyServoModel]:
    """A ``VirtualBus(model_factory=...)`` that compiles ``robot`` behind ``servos``.

    The factory is called with the bus's per-servo physics (in ``servos`` order) and
    the servos' initial shaft angles; the body is compiled then, once.
    """
    specs = tuple(servos)

    def factory(
        physics: Sequence[ServoPhysics],
        *,
        initial_positions: npt.ArrayLike | None = None,
        **options: object,
    ) -> BodyServoModel:
        if len(physics) != len(specs):
            raise ValueError(f"{len(physics)} servos on the bus, {len(specs)} specs given")
        mounts = [
            ServoMount(s.joint, p, s.offset, s.direction, s.gear_ratio)
            for s, p in zip(specs, physics, strict=True)
        ]
        body = MujocoBody.build(robot, mounts, scene=scene, home=home)
        return BodyServoModel(
            physics,
            body,
            initial_positions=initial_positions,
            **options,  # type: ignore[arg-type]
        )

    return factory


# ------------------------------------------------------------------ mujoco_backend
# ``MujocoBackend``: the servo model driving a MuJoCo body, behind the ``Backend`` protocol.
class MujocoBackend(SimBackend):
    """Simulated joints on a MuJoCo body, implementing ``hilbot.hal.backend.Backend``.

    Args:
        servos: the robot's ``ServoSpec`` list (shadows fold into their joint).
        robot: the kinematic model (URDF) the body is compiled from.
        scene: objects around the robot (a table, a box).
        joint_limits: ``{joint: (lower, upper)}`` ``write`` refuses targets outside.
        initial_positions: ``{joint: position}`` at start; the other joints at zero.
        clock: monotonic time source [s]; the body advances by its differences.
        physics: per-model overrides of the servo parameters.
        timestep: the body's fixed step [s].
        **options: the other :class:`SimBackend` options (``load``, ``profile_velocity``,
            ``retries``, ``seed``, ...).
    """

    def __init__(
        self,
        servos: Sequence[ServoSpec],
        robot: Robot,
        *,
        scene: Sequence[SceneObject] = (),
        joint_limits: Mapping[str, tuple[float, float]] | None = None,
        initial_positions: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        physics: Mapping[str, ServoPhysics] | None = None,
        timestep: float = TIMESTEP,
        ambient_temperature: float = 25.0,
        profile_velocity: float = 0.0,
        profile_acceleration: float = 0.0,
        **options: object,
    ) -> None:
        super().__init__(
            servos,
            joint_limits=joint_limits,
            initial_positions=initial_positions,
            clock=clock,
            physics=physics,
            ambient_temperature=ambient_temperature,
            **options,  # type: ignore[arg-type]
        )
        jm = self._map
        mounts = [
            ServoMount(
                joint=name,
                physics=jm.physics[i],
                offset=float(jm.offset[i]),
                direction=int(jm.direction[i]),
                gear_ratio=float(jm.gear_ratio[i]),
            )
            for i, name in enumerate(jm.names)
        ]
        self.body = MujocoBody.build(
            robot, mounts, scene=scene, home=initial_positions, timestep=timestep
        )
        old = self.model
        self.model = BodyServoModel(
            jm.physics,
            self.body,
            initial_positions=old.position,
            ambient_temperature=ambient_temperature,
        )
        self.model.external_torque = old.external_torque.copy()
        self.model.load_function = old.load_function
        self.scene_poses = self.body.free_bodies  # the live view follows pushed objects
        # The joint-space options, or each servo's own configured profile.
        self._set_profile(profile_velocity, profile_acceleration)
