"""Dynamixel servos on pyserial: protocol codec, control tables, backend.

::

    from hilbot.hal.dynamixel import DynamixelBackend
    async with DynamixelBackend(BusSpec("/dev/ttyUSB0"), servos) as arm:
        state = await arm.read()
"""

from hilbot.hal.bus.port import BlockingPortHandler, latency_timer_ms
from hilbot.hal.dynamixel.backend import BackendState, DynamixelBackend
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.layout import ServoUnits
from hilbot.hal.dynamixel.tables import MODELS, ModelSpec, Register, RegisterName, model
from hilbot.hal.dynamixel.timing import CycleBudget, ReadMethod, bus_budget, max_cycle_rate

__all__ = [
    "MODELS",
    "BackendState",
    "BlockingPortHandler",
    "CycleBudget",
    "DynamixelBackend",
    "DynamixelBus",
    "ModelSpec",
    "ReadMethod",
    "Register",
    "RegisterName",
    "ServoUnits",
    "bus_budget",
    "latency_timer_ms",
    "max_cycle_rate",
    "model",
]
