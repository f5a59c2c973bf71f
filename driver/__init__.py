"""The asyncio runtime, safety layer, configs, MQTT teleop and command line.

Public names are imported lazily, so ``hilbot --help`` does not load numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hilbot.driver.config import RobotConfig, load_config
    from hilbot.driver.errors import (
        ConfigError,
        DriverError,
        InvalidTarget,
        LimitViolation,
        RuntimeStateError,
        UnknownChain,
        UnknownJoint,
    )
    from hilbot.driver.runtime import Runtime
    from hilbot.driver.safety import ClampEvent, ClampKind, Mode
    from hilbot.driver.state import Command, CycleRecord, Fault, RuntimeState
    from hilbot.driver.stats import LoopStats

_EXPORTS = {
    "RobotConfig": "hilbot.driver.config",
    "load_config": "hilbot.driver.config",
    "ConfigError": "hilbot.driver.errors",
    "DriverError": "hilbot.driver.errors",
    "InvalidTarget": "hilbot.driver.errors",
    "LimitViolation": "hilbot.driver.errors",
    "RuntimeStateError": "hilbot.driver.errors",
    "UnknownChain": "hilbot.driver.errors",
    "UnknownJoint": "hilbot.driver.errors",
    "Runtime": "hilbot.driver.runtime",
    "ClampEvent": "hilbot.driver.safety",
    "ClampKind": "hilbot.driver.safety",
    "Mode": "hilbot.driver.safety",
    "Command": "hilbot.driver.state",
    "CycleRecord": "hilbot.driver.state",
    "Fault": "hilbot.driver.state",
    "RuntimeState": "hilbot.driver.state",
    "LoopStats": "hilbot.driver.stats",
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
