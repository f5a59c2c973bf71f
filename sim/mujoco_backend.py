"""``MujocoBackend``: the servo model driving a MuJoCo body, behind the ``Backend`` protocol.

The same backend as :class:`~hilbot.sim.SimBackend` (joint mapping, limits, fault
injection, counters, the clock it advances by), with a :class:`BodyServoModel`
instead of the plain servo model: the servos' torques move a physical body with
gravity, a floor and scene objects, stepped at a fixed step.

    async with MujocoBackend(servos, robot, scene=scene, clock=fake.now) as sim:
        await sim.set_torque(True)
        state = await sim.read()      # effort: the current holding the links up

Imports ``mujoco`` (the ``mujoco`` extra).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from hilbot.hal.mapping import ServoSpec
from hilbot.kinematics import Robot
from hilbot.sim.mujoco_body import MujocoBody, ServoMount
from hilbot.sim.mujoco_model import TIMESTEP
from hilbot.sim.mujoco_scene import SceneObject
from hilbot.sim.mujoco_servos import BodyServoModel
from hilbot.sim.servo_physics import ServoPhysics
from hilbot.sim.sim_backend import SimBackend


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
