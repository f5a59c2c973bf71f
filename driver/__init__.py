"""The asyncio runtime, safety layer, configs, MQTT teleop and command line.

Public names are imported lazily, so ``hilbot --help`` does not load numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hilbot.driver.runtime.config import RobotConfig, load_config
    from hilbot.driver.runtime.errors import (
        ConfigError,
        DriverError,
        InvalidTarget,
        LimitViolation,
        RuntimeStateError,
        UnknownChain,
        UnknownJoint,
    )
    from hilbot.driver.runtime.loop import Runtime
    from hilbot.driver.runtime.safety import ClampEvent, ClampKind, Mode
    from hilbot.driver.runtime.state import Command, CycleRecord, Fault, RuntimeState
    from hilbot.driver.runtime.stats import LoopStats

_EXPORTS = {
    "RobotConfig": "hilbot.driver.runtime.config",
    "load_config": "hilbot.driver.runtime.config",
    "ConfigError": "hilbot.driver.runtime.errors",
    "DriverError": "hilbot.driver.runtime.errors",
    "InvalidTarget": "hilbot.driver.runtime.errors",
    "LimitViolation": "hilbot.driver.runtime.errors",
    "RuntimeStateError": "hilbot.driver.runtime.errors",
    "UnknownChain": "hilbot.driver.runtime.errors",
    "UnknownJoint": "hilbot.driver.runtime.errors",
    "Runtime": "hilbot.driver.runtime.loop",
    "ClampEvent": "hilbot.driver.runtime.safety",
    "ClampKind": "hilbot.driver.runtime.safety",
    "Mode": "hilbot.driver.runtime.safety",
    "Command": "hilbot.driver.runtime.state",
    "CycleRecord": "hilbot.driver.runtime.state",
    "Fault": "hilbot.driver.runtime.state",
    "RuntimeState": "hilbot.driver.runtime.state",
    "LoopStats": "hilbot.driver.runtime.stats",
}

__all__ = [
    "ClampEvent",
    "ClampKind",
    "Command",
    "ConfigError",
    "CycleRecord",
    "DriverError",
    "Fault",
    "InvalidTarget",
    "LimitViolation",
    "LoopStats",
    "Mode",
    "RobotConfig",
    "Runtime",
    "RuntimeState",
    "RuntimeStateError",
    "UnknownChain",
    "UnknownJoint",
    "load_config",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hilbot.driver' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
