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
    DataLimitError,
    HalError,
    HardwareFault,
    MalformedReply,
    PortError,
    ServoError,
    ServoLimitError,
    StartupError,
    TorqueNotConfirmed,
    WrongReplyId,
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
    "DataLimitError",
    "EffortUnit",
    "HalError",
    "HardwareErrorFlags",
    "HardwareFault",
    "JointState",
    "MalformedReply",
    "PortError",
    "ServoError",
    "ServoLimitError",
    "ServoSpec",
    "StartupError",
    "TorqueNotConfirmed",
    "WrongReplyId",
]
