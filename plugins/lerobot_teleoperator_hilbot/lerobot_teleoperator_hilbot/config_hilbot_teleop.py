"""The options of ``--teleop.type=hilbot``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lerobot.teleoperators.config import TeleoperatorConfig


@TeleoperatorConfig.register_subclass("hilbot")
@dataclass
class HilbotTeleopConfig(TeleoperatorConfig):
    """A hilbot leader arm, or hilbot's MQTT target stream, as a LeRobot teleoperator.

    ``--teleop.source=arm`` (default): the leader ``--teleop.config`` (``so101_leader``,
    ``koch_v1_1_leader`` or a YAML file) on ``--teleop.backend`` (sim, mujoco, virtual,
    hardware; ``--teleop.port``). ``--teleop.source=mqtt``: a simulated
    ``--teleop.config`` follower that hilbot's MQTT teleop drives (``--teleop.broker``,
    default an embedded broker on 127.0.0.1:1883); its command is the action.
    """

    config: str = "so101_leader"
    source: str = "arm"
    # sim, mujoco, virtual or hardware (default: hardware with --teleop.port, else sim)
    backend: str | None = None
    port: str | None = None
    # the leader's hilbot calibration file (default: its own, from hilbot calibrate)
    calibration: Path | None = None
    # the follower the actions are for (default: the leader's lead.follower)
    follower: str | None = None
    # the follower's hilbot calibration file: its ranges scale the actions
    follower_calibration: Path | None = None
    broker: str | None = None
    # --teleop.backend=virtual: a scripted hand moving the leader (sweep, wave)
    hand: str | None = None
