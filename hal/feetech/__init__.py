"""Feetech STS/SCS servos: the protocol codec, encodings and memory tables."""

from hilbot.hal.feetech.protocol import (
    BROADCAST_ID,
    Instruction,
    InstructionPacket,
    PacketDecoder,
    PacketKind,
    StatusError,
    StatusPacket,
)
from hilbot.hal.feetech.tables import (
    MODELS,
    FeetechModel,
    FeetechRegister,
    Series,
    WordOrder,
    model,
    models_with_number,
)

__all__ = [
    "BROADCAST_ID",
    "MODELS",
    "FeetechModel",
    "FeetechRegister",
    "Instruction",
    "InstructionPacket",
    "PacketDecoder",
    "PacketKind",
    "Series",
    "StatusError",
    "StatusPacket",
    "WordOrder",
    "model",
    "models_with_number",
]
