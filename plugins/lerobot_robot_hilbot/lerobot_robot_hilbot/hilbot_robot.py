"""``HilbotRobot``: LeRobot's robot calls onto hilbot's runtime (hilbot.driver.lerobot_bridge)."""

from __future__ import annotations

import dataclasses
import logging
from functools import cached_property
from typing import Any

from lerobot.cameras.utils import make_cameras_from_configs
from lerobot.robots.robot import Robot
from lerobot.utils.constants import HF_LEROBOT_CALIBRATION, ROBOTS
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from hilbot.driver.lerobot_bridge import HilbotArm
from lerobot_robot_hilbot.config_hilbot_robot import HilbotRobotConfig

logger = logging.getLogger(__name__)

#: LeRobot's robot type -> its class (whose ``name`` names its calibration folder and
#: its datasets' ``robot_type``: ``so_follower`` for the SO-101 since LeRobot 0.4).
LEROBOT_CLASSES = {
    "so_follower": ("lerobot.robots.so_follower", "SO101Follower"),
    "koch_follower": ("lerobot.robots.koch_follower", "KochFollower"),
}


def _lerobot_name(robot_type: str) -> str:
    """The ``name`` of LeRobot's class of ``robot_type`` (``robot_type`` if it has none)."""
    import importlib

    where = LEROBOT_CLASSES.get(robot_type)
    if where is None:
        return robot_type
    try:
        return str(getattr(importlib.import_module(where[0]), where[1]).name)
    except (ImportError, AttributeError):  # another LeRobot version
        return robot_type


class HilbotRobot(Robot):
    """A hilbot robot: its runtime runs on a background thread at the config's own rate.

    ``send_action`` hands the targets to the motion layer (safety last, watchdog armed)
    and returns the command the runtime wrote last; ``get_observation`` returns the newest
    measured state (and the cameras' newest frames). For the arms LeRobot ships, the keys
    and units are those of LeRobot's own class of the arm, and ``name`` / ``robot_type``
    are that class's (datasets move between the two unchanged).
    """

    config_class = HilbotRobotConfig
    name = "hilbot"

    def __init__(self, config: HilbotRobotConfig) -> None:
        from hilbot.driver.dataset.features import LEROBOT_ARMS
        from hilbot.driver.runtime.config import load_config

        hilbot_name = load_config(config.config).name
        arm = LEROBOT_ARMS.get(hilbot_name)
        theirs = _lerobot_name(arm.robot_type) if arm is not None else None
        if config.calibration_dir is None:  # where LeRobot keeps its own class's files
            folder = HF_LEROBOT_CALIBRATION / ROBOTS / (theirs or f"hilbot_{hilbot_name}")
            config = dataclasses.replace(config, calibration_dir=folder)
        super().__init__(config)
        self.config = config
        self.arm = HilbotArm(
            config.config,
            config.backend or ("hardware" if config.port else "sim"),
            port=config.port,
            calibration=config.calibration,
            lerobot_file=self.calibration_fpath,
            rate_hz=config.rate_hz,
            hand=config.hand,
        )
        self.name = self.robot_type = theirs or self.arm.robot_type
        self.cameras = make_cameras_from_configs(config.cameras)

    @property
    def _motors_ft(self) -> dict[str, type]:
        return dict.fromkeys(self.arm.units.keys, float)

    @property
    def _cameras_ft(self) -> dict[str, tuple[int, int, int]]:
        return {
            cam: (self.config.cameras[cam].height, self.config.cameras[cam].width, 3)
            for cam in self.cameras
        }

    @cached_property
    def observation_features(self) -> dict[str, Any]:
        """The arm's ``<joint>.pos`` (float) and each camera's (height, width, 3)."""
        return {**self._motors_ft, **self._cameras_ft}

    @cached_property
    def action_features(self) -> dict[str, Any]:
        """The arm's ``<joint>.pos`` (float), in the units of LeRobot's class of the arm."""
        return self._motors_ft

    @property
    def is_connected(self) -> bool:
        """The runtime runs (and every camera is connected)."""
        return self.arm.connected and all(cam.is_connected for cam in self.cameras.values())

    @property
    def is_calibrated(self) -> bool:
        """A calibration applies, or the backend needs none (sim, mujoco, virtual)."""
        return self.arm.calibrated_here

    def connect(self, calibrate: bool = True) -> None:
        """Start the runtime (calibrating first a real arm that has none) and arm it."""
        if self.arm.connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        if not self.is_calibrated and calibrate:
            logger.info("%s has no calibration: running hilbot's guided calibration", self)
            self.arm.calibrate()
        self.arm.connect()
        try:
            for cam in self.cameras.values():
                cam.connect()
        except BaseException:
            self.arm.disconnect()
            raise
        logger.info("%s connected (hilbot %s on %s)", self, self.arm.name, self.arm.backend)

    def calibrate(self) -> None:
        """Run hilbot's guided calibration; LeRobot's file of it goes to calibration_fpath."""
        self.arm.calibrate()
        if self.calibration_fpath.is_file():
            self._load_calibration()

    def configure(self) -> None:
        """Nothing to do: hilbot's config sets the servos up when the runtime connects."""

    def get_observation(self) -> dict[str, Any]:
        """The newest measured joint positions and camera frames."""
        if not self.arm.connected:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        obs: dict[str, Any] = self.arm.observation()
        for key, cam in self.cameras.items():
            read = getattr(cam, "read_latest", None) or cam.async_read
            obs[key] = read()
        return obs

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        """Hand ``action`` to the motion layer; return the command written last."""
        if not self.arm.connected:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        return self.arm.act(action)

    def disconnect(self) -> None:
        """Controlled stop, then the runtime's shutdown (torque per the config)."""
        if not self.arm.connected and self.arm._runtime is None:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        try:
            self.arm.disconnect()
        finally:
            for cam in self.cameras.values():
                if cam.is_connected:
                    cam.disconnect()
        logger.info("%s disconnected", self)
