"""Simulation: servo dynamics model, in-process SimBackend, virtual Dynamixel and Feetech buses."""

from hilbot.sim.faults import FaultTable, Presence, ReplyFate, ServoFaults
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import ServoPhysics, known_models, physics_for
from hilbot.sim.sim_backend import SimBackend
from hilbot.sim.virtual_bus import (
    FeetechVirtualBus,
    VirtualBus,
    running_feetech_bus,
    running_virtual_bus,
)

__all__ = [
    "FaultTable",
    "FeetechVirtualBus",
    "Presence",
    "ReplyFate",
    "ServoFaults",
    "ServoModel",
    "ServoPhysics",
    "SimBackend",
    "VirtualBus",
    "known_models",
    "physics_for",
    "running_feetech_bus",
    "running_virtual_bus",
]
