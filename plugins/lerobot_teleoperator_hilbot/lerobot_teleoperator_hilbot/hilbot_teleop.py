"""``HilbotTeleop``: LeRobot's teleoperator calls onto a hilbot leader arm or MQTT stream."""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any

from lerobot.teleoperators.teleoperator import Teleoperator
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from hilbot.driver.lerobot_bridge import HilbotLeader
from lerobot_teleoperator_hilbot.config_hilbot_teleop import HilbotTeleopConfig

logger = logging.getLogger(__name__)


class HilbotTeleop(Teleoperator):
    """The follower's targets, from a hilbot leader arm or hilbot's MQTT target stream.

    ``get_action`` returns the follower's ``<joint>.pos`` in the units of LeRobot's class
    of the follower: what ``--robot.type=hilbot`` (or LeRobot's own class) takes.
    """

    config_class = HilbotTeleopConfig
    name = "hilbot"

    def __init__(self, config: HilbotTeleopConfig) -> None:
        super().__init__(config)
        self.config = config
        self.leader = HilbotLeader(
            config.config,
            config.source,
            backend=config.backend or ("hardware" if config.port else "sim"),
            port=config.port,
            calibration=config.calibration,
            follower=config.follower,
            follower_calibration=config.follower_calibration,
            broker=config.broker,
            hand=config.hand,
        )

    @cached_property
    def action_features(self) -> dict[str, type]:
        """The follower's ``<joint>.pos`` (float)."""
        return dict.fromkeys(self.leader.units.keys, float)

    @cached_property
    def feedback_features(self) -> dict[str, type]:
        """None: the leader arm is limp."""
        return {}

    @property
    def is_connected(self) -> bool:
        """The leader's runtime runs."""
        return self.leader.connected

    @property
    def is_calibrated(self) -> bool:
        """The leader has a calibration, or its backend needs none."""
        return self.leader.arm.calibrated_here

    def connect(self, calibrate: bool = True) -> None:
        """Start reading the leader (or serving MQTT into the simulated follower)."""
        if self.leader.connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        if not self.is_calibrated and calibrate and self.config.source == "arm":
            logger.info("%s has no calibration: running hilbot's guided calibration", self)
            self.leader.arm.calibrate()
        self.leader.connect()
        logger.info("%s connected", self)

    def calibrate(self) -> None:
        """Run hilbot's guided calibration of the leader arm."""
        self.leader.arm.calibrate()

    def configure(self) -> None:
        """Nothing to do: hilbot's config sets the leader up when its runtime connects."""

    def get_action(self) -> dict[str, Any]:
        """The follower's newest targets, in the units of its LeRobot class."""
        if not self.leader.connected:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        return self.leader.action()

    def send_feedback(self, feedback: dict[str, Any]) -> None:
        """No feedback: the leader arm is limp."""

    def disconnect(self) -> None:
        """Stop the leader's runtime."""
        if self.leader._runtime is None:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        self.leader.disconnect()
        logger.info("%s disconnected", self)
