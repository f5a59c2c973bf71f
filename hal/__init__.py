"""Hardware abstraction layer: the Backend protocol, joint state, and the Dynamixel backend."""

from hilbot.hal.backend import (
    Backend,
    BusCounters,
    EffortUnit,
    HardwareErrorFlags,
    JointState,
)
from hilbot.hal.errors import (
    BusError,
    CommandError,
    CommError,
    CommTimeout,
    ConfigError,
    CrcError,
    HalError,
    HardwareFault,
    MalformedReply,
    PortError,
    ServoError,
    StartupError,
)
from hilbot.hal.mapping import BusSpec, ServoSpec

__all__ = [
    "Backend",
    "BusCounters",
    "BusError",
    "BusSpec",
    "CommError",
    "CommTimeout",
    "CommandError",
    "ConfigError",
    "CrcError",
    "EffortUnit",
    "HalError",
    "HardwareErrorFlags",
    "HardwareFault",
    "JointState",
    "MalformedReply",
    "PortError",
    "ServoError",
    "ServoSpec",
    "StartupError",
]
