"""Sans-I/O codec for Dynamixel Protocol 1.0 and 2.0: bytes in, packets out.

Protocol 2.0 (https://emanual.robotis.com/docs/en/dxl/protocol2/)::

    FF FF FD 00 | ID | LEN_L LEN_H | INST | PARAMS ... | CRC_L CRC_H

``LEN`` counts INST, the (stuffed) parameters and the CRC. A status packet's
INST is 0x55 followed by the ERR byte. The CRC is CRC-16 with polynomial
0x8005, initial value 0, no reflection, over every byte before it. Wherever the
payload (INST onwards) contains ``FF FF FD``, the sender appends ``FD`` so that a
header never appears inside a packet ("byte stuffing").

Protocol 1.0 (https://emanual.robotis.com/docs/en/dxl/protocol1/)::

    FF FF | ID | LEN | INST or ERR | PARAMS ... | CHECKSUM

``LEN`` is the parameter count + 2; the checksum is ``~(ID + LEN + INST +
sum(PARAMS)) & 0xFF``. There is no stuffing.

Nothing here does I/O: :func:`encode_instruction` and :func:`encode_status`
build bytes, and :class:`PacketDecoder` turns a byte stream (in any chunking)
into packets, skipping garbage and reporting corrupt packets as
:class:`DecodeError` values so that a bus server can count them.
"""

from hilbot.hal.dynamixel.decoder import PacketDecoder, decode_all
from hilbot.hal.dynamixel.fast_reply import (
    FastStatusPart,
    encode_fast_status,
    fast_status_prefix,
    split_fast_status,
)
from hilbot.hal.dynamixel.packets import (
    ALERT_BIT,
    BROADCAST_ID,
    CRC_TABLE,
    HEADER_1,
    HEADER_2,
    MAX_ID,
    MAX_LENGTH_1,
    MAX_LENGTH_2,
    PROTOCOL_1_INSTRUCTIONS,
    DecodeError,
    DecodeErrorReason,
    Instruction,
    InstructionPacket,
    Packet,
    PacketKind,
    Protocol1Error,
    StatusErrorCode,
    StatusPacket,
    checksum,
    crc16,
    encode,
    encode_instruction,
    encode_status,
    hardware_flags_from_protocol1,
    hardware_flags_to_protocol1,
    stuff,
    unstuff,
)
from hilbot.hal.dynamixel.params import (
    bulk_read_params,
    bulk_write_params,
    read_params,
    sync_read_params,
    sync_write_params,
    write_params,
)

__all__ = [
    "ALERT_BIT",
    "BROADCAST_ID",
    "CRC_TABLE",
    "HEADER_1",
    "HEADER_2",
    "MAX_ID",
    "MAX_LENGTH_1",
    "MAX_LENGTH_2",
    "PROTOCOL_1_INSTRUCTIONS",
    "DecodeError",
    "DecodeErrorReason",
    "FastStatusPart",
    "Instruction",
    "InstructionPacket",
    "Packet",
    "PacketDecoder",
    "PacketKind",
    "Protocol1Error",
    "StatusErrorCode",
    "StatusPacket",
    "bulk_read_params",
    "bulk_write_params",
    "checksum",
    "crc16",
    "decode_all",
    "encode",
    "encode_fast_status",
    "encode_instruction",
    "encode_status",
    "fast_status_prefix",
    "hardware_flags_from_protocol1",
    "hardware_flags_to_protocol1",
    "read_params",
    "split_fast_status",
    "stuff",
    "sync_read_params",
    "sync_write_params",
    "unstuff",
    "write_params",
]
