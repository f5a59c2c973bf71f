"""hilbot as a LeRobot teleoperator (``--teleop.type=hilbot``); importing it registers it."""

from lerobot_teleoperator_hilbot.config_hilbot_teleop import HilbotTeleopConfig
from lerobot_teleoperator_hilbot.hilbot_teleop import HilbotTeleop

__all__ = ["HilbotTeleop", "HilbotTeleopConfig"]
