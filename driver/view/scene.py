"""``RobotScene``: the robot drawn in a viser scene, posed from joint positions.

Two copies of the link geometry: the robot at its measured joint positions (solid)
and a ghost at the commanded ones (translucent); per chain a frame at its tool link
and a sphere at its pose target; a panel with the mode and the faults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from hilbot.driver.view.geometry import (
    F64,
    link_radius,
    link_segments,
    rotation_wxyz,
    segment_pose,
)
from hilbot.kinematics import Robot

MEASURED_COLOR = (40, 110, 220)
GHOST_COLOR = (255, 150, 30)
TARGET_COLOR = (230, 30, 60)


class ChainView(NamedTuple):
    """A chain shown in the view: its name and links."""

    name: str
    source_link: str
    target_link: str


class Frame(NamedTuple):
    """What one view update shows (copied out of the loop, never shared with it)."""

    measured: dict[str, float]
    commanded: dict[str, float] | None
    targets: dict[str, F64]  # chain -> target position in its source frame [m]
    mode: str
    faults: str
    time: float = 0.0


class RobotScene:
    """The robot, its ghost, its chain frames and targets in a viser server's scene.

    Args:
        server: a running ``viser.ViserServer``.
        robot: the kinematic model.
        chains: the chains whose tool frames and targets are drawn.
    """

    def __init__(self, server: Any, robot: Robot, chains: Sequence[ChainView]) -> None:
        self.server = server
        self.robot = robot
        self.chains = tuple(chains)
        self._segments = link_segments(robot)
        radius = link_radius(robot)
        scene = server.scene
        stage(server, robot)
        self._measured = [
            scene.add_cylinder(
                f"/robot/{s.link}_{k}", radius=radius, height=1.0, color=MEASURED_COLOR
            )
            for k, s in enumerate(self._segments)
        ]
        self._ghost = [
            scene.add_cylinder(
                f"/ghost/{s.link}_{k}",
                radius=radius * 1.05,
                height=1.0,
                color=GHOST_COLOR,
                opacity=0.35,
            )
            for k, s in enumerate(self._segments)
        ]
        self._frames = {
            c.name: scene.add_frame(
                f"/frames/{c.name}", axes_length=4 * radius, axes_radius=radius / 5
            )
            for c in chains
        }
        self._targets = {
            c.name: scene.add_icosphere(
                f"/targets/{c.name}", radius=radius * 0.8, color=TARGET_COLOR, visible=False
            )
            for c in chains
        }
        self._status = server.gui.add_markdown("**mode** —")
        self.objects: dict[str, Any] = {}  # scene object name -> its handle

    def add_objects(self, objects: Sequence[Any]) -> None:
        """Draw scene objects (:class:`~hilbot.sim.mujoco_scene.SceneObject`) where declared.

        Fixed objects (a table) stay there; a free object (a box the arm pushes) starts
        there and moves with ``move_objects``.
        """
        for obj in objects:
            color = tuple(int(255 * c) for c in obj.rgba[:3])
            opacity = 1.0
            name = f"/scene/{obj.name}"
            size = obj.size
            if obj.shape == "box":
                self.objects[obj.name] = self.server.scene.add_box(
                    name,
                    color=color,
                    dimensions=tuple(2 * s for s in size),
                    opacity=opacity,
                    position=obj.pos,
                )
            elif obj.shape == "sphere":
                self.objects[obj.name] = self.server.scene.add_icosphere(
                    name, radius=size[0], color=color, opacity=opacity, position=obj.pos
                )
            else:  # cylinder, capsule: a cylinder of the same radius and length
                self.objects[obj.name] = self.server.scene.add_cylinder(
                    name,
                    radius=size[0],
                    height=2 * size[1],
                    color=color,
                    opacity=opacity,
                    position=obj.pos,
                )

    def move_objects(self, poses: Mapping[str, tuple[F64, F64]]) -> None:
        """Place free scene objects at ``{name: (position, wxyz)}`` (from the body)."""
        with self.server.atomic():
            for name, (position, wxyz) in poses.items():
                handle = self.objects.get(name)
                if handle is not None:
                    handle.position = position
                    handle.wxyz = wxyz

    def update(self, frame: Frame) -> None:
        """Pose everything from ``frame``."""
        with self.server.atomic():
            poses = self.robot.fk(_known(self.robot, frame.measured))
            self._pose(self._measured, poses)
            if frame.commanded is not None:
                self._pose(self._ghost, self.robot.fk(_known(self.robot, frame.commanded)))
            for chain in self.chains:
                tool = poses[chain.target_link]
                handle = self._frames[chain.name]
                handle.position = tool[:3, 3]
                handle.wxyz = rotation_wxyz(tool[:3, :3])
                target = frame.targets.get(chain.name)
                marker = self._targets[chain.name]
                marker.visible = target is not None
                if target is not None:
                    source = poses[chain.source_link]
                    marker.position = source[:3, :3] @ target + source[:3, 3]
            self._status.content = f"**mode** {frame.mode}  \n**faults** {frame.faults or 'none'}"

    def _pose(self, handles: Sequence[Any], poses: Mapping[str, F64]) -> None:
        for handle, segment in zip(handles, self._segments, strict=True):
            wxyz, center, length = segment_pose(poses[segment.link], segment)
            handle.wxyz = wxyz
            handle.position = center
            handle.scale = (1.0, 1.0, max(length, 1e-6))


def stage(server: Any, robot: Robot) -> None:
    """The empty stage: z up, a floor grid and a camera framing ``robot``'s reach."""
    reach = max(0.1, sum(float(np.linalg.norm(s.end - s.start)) for s in link_segments(robot)))
    server.scene.set_up_direction("+z")
    server.scene.add_grid("/grid", width=2 * reach, height=2 * reach, cell_size=reach / 10)
    # Start the camera where the whole robot fills the view (viser's default is at 3 m).
    camera = server.initial_camera
    camera.position = (0.9 * reach, -0.9 * reach, 0.7 * reach)
    camera.look_at = (0.15 * reach, 0.0, 0.2 * reach)


def _known(robot: Robot, positions: Mapping[str, float]) -> dict[str, float]:
    joints = robot.joints
    return {
        j: float(v)
        for j, v in positions.items()
        if j in joints and joints[j].mimic is None and np.isfinite(v)
    }
