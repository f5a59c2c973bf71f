"""hilbot behind LeRobot's robot and teleoperator calls (the logic of the two plugins).

The plugin distributions ``lerobot_robot_hilbot`` and ``lerobot_teleoperator_hilbot``
(``plugins/``) subclass LeRobot's ``Robot`` and ``Teleoperator`` and delegate here, so
this package needs neither LeRobot nor torch.
"""

from hilbot.driver.lerobot_bridge.arm import HilbotArm
from hilbot.driver.lerobot_bridge.background import BackgroundRuntime, RuntimeFault, Snapshot
from hilbot.driver.lerobot_bridge.leader import HilbotLeader
from hilbot.driver.lerobot_bridge.units import LeRobotUnits, to_joint

__all__ = [
    "BackgroundRuntime",
    "HilbotArm",
    "HilbotLeader",
    "LeRobotUnits",
    "RuntimeFault",
    "Snapshot",
    "to_joint",
]
