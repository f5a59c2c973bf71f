"""A MuJoCo body behind a virtual bus: the model factory ``VirtualBus`` takes.

    factory = body_model_factory(robot, servos, scene=scene, home=config.home)
    with running_virtual_bus(servos, model_factory=factory, ...) as bus:
        ...  # the real backend on bus.port drives a physically simulated arm

Every servo on the bus (shadows too) is a mount on its joint; the bus's own thread
steps the body whenever it steps its servo model. Imports ``mujoco`` (the extra).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy.typing as npt

from hilbot.hal.mapping import ServoSpec
from hilbot.kinematics import Robot
from hilbot.sim.mujoco_body import MujocoBody, ServoMount
from hilbot.sim.mujoco_scene import SceneObject
from hilbot.sim.mujoco_servos import BodyServoModel
from hilbot.sim.servo_physics import ServoPhysics


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
