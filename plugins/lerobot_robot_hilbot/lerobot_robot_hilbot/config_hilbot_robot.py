"""The options of ``--robot.type=hilbot``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lerobot.cameras import CameraConfig
from lerobot.robots.config import RobotConfig


@RobotConfig.register_subclass("hilbot")
@dataclass
class HilbotRobotConfig(RobotConfig):
    """hilbot's runtime as a LeRobot robot.

    ``--robot.config``: a shipped hilbot robot (``so101_follower``, ``koch_v1_1_follower``,
    ...) or a YAML file. ``--robot.backend``: ``sim`` (in-process simulator), ``mujoco``,
    ``virtual`` (virtual buses on pseudo-terminals) or ``hardware`` (the config's serial
    ports, or ``--robot.port``). ``--robot.id`` and ``--robot.calibration_dir`` name
    LeRobot's calibration file of the arm, as for LeRobot's own robots (default folder:
    that of LeRobot's class of the arm, so an arm LeRobot calibrated is found).
    """

    config: str = "so101_follower"
    # sim, mujoco, virtual or hardware (default: hardware with --robot.port, else sim)
    backend: str | None = None
    port: str | None = None
    # a hilbot calibration file (default: the robot's own, from hilbot calibrate)
    calibration: Path | None = None
    # the control loop's rate [Hz] (default: the config's)
    rate_hz: float | None = None
    # --robot.backend=virtual: a scripted hand moving the torque-off servos (sweep, wave)
    hand: str | None = None
    cameras: dict[str, CameraConfig] = field(default_factory=dict)
