"""hilbot as a LeRobot robot (``--robot.type=hilbot``): importing it registers the config."""

from lerobot_robot_hilbot.config_hilbot_robot import HilbotRobotConfig
from lerobot_robot_hilbot.hilbot_robot import HilbotRobot

__all__ = ["HilbotRobot", "HilbotRobotConfig"]
