"""The Dynamixel codec: e-manual golden packets, resynchronisation, and round trips."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.protocol import (
    BROADCAST_ID,
    PROTOCOL_1_INSTRUCTIONS,
    DecodeError,
    DecodeErrorReason,
    FastStatusPart,
    Instruction,
    InstructionPacket,
    PacketDecoder,
    PacketKind,
    Protocol1Error,
    StatusErrorCode,
    StatusPacket,
    bulk_read_params,
    crc16,
    encode_fast_status,
    encode_instruction,
    encode_status,
    fast_status_prefix,
    hardware_flags_from_protocol1,
    read_params,
    split_fast_status,
    stuff,
    sync_read_params,
    sync_write_params,
    unstuff,
    write_params,
)

Ins = Instruction


def hx(text: str) -> bytes:
    return bytes.fromhex(text)


# Protocol 2.0 examples from https://emanual.robotis.com/docs/en/dxl/protocol2/
GOLDEN_2_INSTRUCTIONS = [
    ("ping id 1", InstructionPacket(2, 1, Ins.PING), "FF FF FD 00 01 03 00 01 19 4E"),
    (
        "broadcast ping",
        InstructionPacket(2, BROADCAST_ID, Ins.PING),
        "FF FF FD 00 FE 03 00 01 31 42",
    ),
    (
        "read present position",
        InstructionPacket(2, 1, Ins.READ, read_params(2, 132, 4)),
        "FF FF FD 00 01 07 00 02 84 00 04 00 1D 15",
    ),
    (
        "write goal position 512",
        InstructionPacket(2, 1, Ins.WRITE, write_params(2, 116, (512).to_bytes(4, "little"))),
        "FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89",
    ),
    (
        "sync read ids 1 2",
        InstructionPacket(2, BROADCAST_ID, Ins.SYNC_READ, sync_read_params(132, 4, [1, 2])),
        "FF FF FD 00 FE 09 00 82 84 00 04 00 01 02 CE FA",
    ),
    (
        "sync write ids 1 2",
        InstructionPacket(
            2,
            BROADCAST_ID,
            Ins.SYNC_WRITE,
            sync_write_params(
                2, 116, 4, {1: (150).to_bytes(4, "little"), 2: (170).to_bytes(4, "little")}
            ),
        ),
        "FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87",
    ),
    ("reboot id 1", InstructionPacket(2, 1, Ins.REBOOT), "FF FF FD 00 01 03 00 08 2F 4E"),
    ("action id 1", InstructionPacket(2, 1, Ins.ACTION), "FF FF FD 00 01 03 00 05 02 CE"),
    (
        "factory reset all but the id",
        InstructionPacket(2, 1, Ins.FACTORY_RESET, b"\x01"),
        "FF FF FD 00 01 04 00 06 01 A1 E6",
    ),
]

GOLDEN_2_STATUS = [
    (
        "ping reply XM430-W210",
        StatusPacket(2, 1, 0, bytes([0x06, 0x04, 0x26])),
        "FF FF FD 00 01 07 00 55 00 06 04 26 65 5D",
    ),
    (
        "read reply 166",
        StatusPacket(2, 1, 0, bytes([0xA6, 0, 0, 0])),
        "FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0",
    ),
    ("write reply", StatusPacket(2, 1, 0), "FF FF FD 00 01 04 00 55 00 A1 0C"),
    (
        "sync read reply id 2",
        StatusPacket(2, 2, 0, bytes([0x1F, 0x08, 0, 0])),
        "FF FF FD 00 02 08 00 55 00 1F 08 00 00 BA BE",
    ),
]

# Protocol 1.0 examples from https://emanual.robotis.com/docs/en/dxl/protocol1/
GOLDEN_1_INSTRUCTIONS = [
    ("ping id 1", InstructionPacket(1, 1, Ins.PING), "FF FF 01 02 01 FB"),
    (
        "read temperature",
        InstructionPacket(1, 1, Ins.READ, read_params(1, 43, 1)),
        "FF FF 01 04 02 2B 01 CC",
    ),
    (
        "broadcast set id 1",
        InstructionPacket(1, BROADCAST_ID, Ins.WRITE, write_params(1, 3, b"\x01")),
        "FF FF FE 04 03 03 01 F6",
    ),
    (
        "sync write 4 servos",
        InstructionPacket(
            1,
            BROADCAST_ID,
            Ins.SYNC_WRITE,
            sync_write_params(
                1,
                0x1E,
                4,
                {
                    0: hx("10 00 50 01"),
                    1: hx("20 02 60 03"),
                    2: hx("30 00 70 01"),
                    3: hx("20 02 80 03"),
                },
            ),
        ),
        "FF FF FE 18 83 1E 04 00 10 00 50 01 01 20 02 60 03 02 30 00 70 01 03 20 02 80 03 12",
    ),
    (
        "reg write goal position 500",
        InstructionPacket(1, 1, Ins.REG_WRITE, write_params(1, 0x1E, hx("F4 01"))),
        "FF FF 01 05 04 1E F4 01 E2",
    ),
    ("broadcast action", InstructionPacket(1, BROADCAST_ID, Ins.ACTION), "FF FF FE 02 05 FA"),
    ("factory reset id 0", InstructionPacket(1, 0, Ins.FACTORY_RESET), "FF FF 00 02 06 F7"),
]
GOLDEN_1_STATUS = [
    ("ping reply", StatusPacket(1, 1, 0), "FF FF 01 02 00 FC"),
    ("temperature 32", StatusPacket(1, 1, 0, b"\x20"), "FF FF 01 03 00 20 DB"),
]

# The e-manual's fast sync read reply: ids 3, 7, 4 answer a 4-byte read of address 132.
FAST_REPLY = hx(
    "FF FF FD 00 FE 19 00 55 00 03 A6 00 00 00 84 08 00 07 1F 08 00 00 16 CA"
    " 00 04 FF 03 00 00 D1 9E"
)
FAST_PARTS = [
    FastStatusPart(3, 0, hx("A6 00 00 00")),
    FastStatusPart(7, 0, hx("1F 08 00 00")),
    FastStatusPart(4, 0, hx("FF 03 00 00")),
]


@pytest.mark.parametrize(
    ("packet", "wire"),
    [(p, w) for _, p, w in GOLDEN_2_INSTRUCTIONS + GOLDEN_1_INSTRUCTIONS],
    ids=[n for n, _, _ in GOLDEN_2_INSTRUCTIONS]
    + [f"1.0 {n}" for n, _, _ in GOLDEN_1_INSTRUCTIONS],
)
def test_instruction_golden(packet, wire):
    assert encode_instruction(packet) == hx(wire)
    assert PacketDecoder(packet.protocol, PacketKind.INSTRUCTION).feed(hx(wire)) == [packet]


@pytest.mark.parametrize(
    ("packet", "wire"),
    [(p, w) for _, p, w in GOLDEN_2_STATUS + GOLDEN_1_STATUS],
    ids=[n for n, _, _ in GOLDEN_2_STATUS] + [f"1.0 {n}" for n, _, _ in GOLDEN_1_STATUS],
)
def test_status_golden(packet, wire):
    assert encode_status(packet) == hx(wire)
    assert PacketDecoder(packet.protocol, PacketKind.STATUS).feed(hx(wire)) == [packet]


def test_crc_of_the_emanual_example():
    assert crc16(hx("FF FF FD 00 01 03 00 01")) == 0x4E19


def _crc_bitwise(data: bytes, crc: int = 0) -> int:
    """CRC-16/BUYPASS one bit at a time, straight from its definition (poly 0x8005)."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


@given(data=st.binary(max_size=300), start=st.integers(0, 0xFFFF), cut=st.integers(0, 300))
def test_crc_matches_the_bitwise_definition_and_continues_across_chunks(data, start, cut):
    assert crc16(data, start) == _crc_bitwise(data, start)
    assert crc16(data[cut:], crc16(data[:cut], start)) == crc16(data, start)
    assert crc16(bytearray(data), start) == crc16(memoryview(data), start) == crc16(data, start)


def test_fast_sync_read_reply_matches_the_emanual():
    assert encode_fast_status(FAST_PARTS) == FAST_REPLY
    (packet,) = PacketDecoder(2, PacketKind.STATUS).feed(FAST_REPLY)
    assert isinstance(packet, StatusPacket)
    assert packet.id == BROADCAST_ID
    assert split_fast_status(packet, [4, 4, 4]) == FAST_PARTS


def test_truncated_fast_reply_keeps_the_slices_before_the_gap():
    # Servo 7 never answered: the reply announces 3 slices (LEN 0x19) but carries one,
    # whose running CRC still checks; the garbage-free prefix is all that is kept.
    truncated = FAST_REPLY[:16]
    assert encode_fast_status(FAST_PARTS[:1], announced=[4, 4, 4]) == truncated
    assert fast_status_prefix(truncated, [4, 4, 4]) == FAST_PARTS[:1]
    assert fast_status_prefix(FAST_REPLY, [4, 4, 4]) == FAST_PARTS
    broken = bytearray(FAST_REPLY)
    broken[18] ^= 0x01  # a data byte of the second slice
    assert fast_status_prefix(bytes(broken), [4, 4, 4]) == FAST_PARTS[:1]
    assert fast_status_prefix(b"\xff\xff", [4]) == []


def test_fast_reply_with_wrong_lengths_is_rejected():
    (packet,) = PacketDecoder(2, PacketKind.STATUS).feed(FAST_REPLY)
    with pytest.raises(ValueError, match="3 servos"):
        split_fast_status(packet, [4, 4, 2])


def test_byte_stuffing_in_a_write():
    data = hx("FF FF FD 00")
    packet = InstructionPacket(2, 1, Ins.WRITE, write_params(2, 116, data))
    wire = encode_instruction(packet)
    assert hx("FF FF FD FD") in wire[7:]
    assert int.from_bytes(wire[5:7], "little") == 3 + 2 + 4 + 1  # length counts the stuffed byte
    assert PacketDecoder(2, PacketKind.INSTRUCTION).feed(wire) == [packet]


def test_decoder_skips_garbage_and_reports_crc_errors():
    good = encode_status(StatusPacket(2, 5, 0, b"\x01\x02"))
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    decoder = PacketDecoder(2, PacketKind.STATUS)
    out = decoder.feed(b"\x00\x13\xff\xff" + bytes(bad) + b"\xfe" + good)
    assert len(out) == 2
    assert isinstance(out[0], DecodeError)
    assert out[0].reason is DecodeErrorReason.CRC
    assert out[0].id == 5
    assert out[1] == StatusPacket(2, 5, 0, b"\x01\x02")
    assert decoder.discarded == 5


def test_decoder_handles_one_byte_at_a_time():
    wire = encode_status(StatusPacket(2, 9, 0x80, b"\xaa\xbb\xcc"))
    decoder = PacketDecoder(2, PacketKind.STATUS)
    results = [r for b in wire for r in decoder.feed(bytes([b]))]
    assert results == [StatusPacket(2, 9, 0x80, b"\xaa\xbb\xcc")]
    assert results[0].alert


def test_protocol1_checksum_error_and_resync():
    good = encode_status(StatusPacket(1, 3, 0, b"\x10"))
    bad = good[:-1] + bytes([good[-1] ^ 1])
    out = PacketDecoder(1, PacketKind.STATUS).feed(b"\xff" + bad + good)
    assert [type(o) for o in out] == [DecodeError, StatusPacket]
    assert out[0].reason is DecodeErrorReason.CHECKSUM


def test_status_stream_ignores_instructions():
    stream = encode_instruction(InstructionPacket(2, 1, Ins.PING)) + encode_status(
        StatusPacket(2, 1)
    )
    assert PacketDecoder(2, PacketKind.STATUS).feed(stream) == [StatusPacket(2, 1)]


def test_error_byte_decoding():
    assert StatusPacket(2, 1, 0x84).error_code is StatusErrorCode.DATA_RANGE_ERROR
    assert StatusPacket(2, 1, 0x84).alert
    p1 = StatusPacket(1, 1, int(Protocol1Error.OVERLOAD | Protocol1Error.RANGE))
    assert p1.alert
    assert p1.error_code == Protocol1Error.RANGE
    assert hardware_flags_from_protocol1(0x25) == (
        HardwareErrorFlags.INPUT_VOLTAGE
        | HardwareErrorFlags.OVERHEATING
        | HardwareErrorFlags.OVERLOAD
    )


def test_bulk_read_params_layout():
    assert bulk_read_params(2, [(1, 144, 2)]) == hx("01 90 00 02 00")
    assert bulk_read_params(1, [(1, 30, 2)]) == hx("00 02 01 1E")


def test_invalid_packets_are_rejected():
    with pytest.raises(ValueError, match=r"Protocol 1\.0"):
        InstructionPacket(1, 1, Ins.FAST_SYNC_READ)
    with pytest.raises(ValueError, match="packet id"):
        InstructionPacket(2, 253, Ins.PING)
    with pytest.raises(ValueError, match="protocol"):
        StatusPacket(3, 1)


ids = st.integers(0, 252) | st.just(BROADCAST_ID)
payload = st.binary(max_size=64) | st.lists(
    st.sampled_from([b"\xff", b"\xfd", b"\x00", b"\xff\xff\xfd"]), max_size=20
).map(b"".join)


@settings(max_examples=100, deadline=None)
@given(
    protocol=st.sampled_from([1, 2]),
    packet_id=ids,
    params=payload,
    instruction=st.sampled_from(sorted(Ins, key=int)),
    junk=st.binary(max_size=8),
)
def test_instruction_round_trip(protocol, packet_id, params, instruction, junk):
    if protocol == 1 and instruction not in PROTOCOL_1_INSTRUCTIONS:
        instruction = Ins.WRITE
    if instruction is Ins.STATUS:
        instruction = Ins.READ
    packet = InstructionPacket(protocol, packet_id, instruction, params)
    wire = encode_instruction(packet)
    decoder = PacketDecoder(protocol, PacketKind.INSTRUCTION)
    out = decoder.feed(junk.replace(b"\xff", b"") + wire)
    assert out == [packet]


@settings(max_examples=100, deadline=None)
@given(
    protocol=st.sampled_from([1, 2]),
    packet_id=st.integers(0, 252),
    error=st.integers(0, 255),
    params=payload,
    split=st.integers(0, 80),
)
def test_status_round_trip_in_two_chunks(protocol, packet_id, error, params, split):
    packet = StatusPacket(protocol, packet_id, error, params)
    wire = encode_status(packet)
    decoder = PacketDecoder(protocol, PacketKind.STATUS)
    out = decoder.feed(wire[:split]) + decoder.feed(wire[split:])
    assert out == [packet]
    assert decoder.pending == 0


@settings(max_examples=100, deadline=None)
@given(data=payload)
def test_stuffing_round_trip(data):
    assert unstuff(stuff(data)) == data
    assert b"\xff\xff\xfd" + b"\xfd" not in data or stuff(data) != data


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(
        st.tuples(st.integers(0, 252), st.integers(0, 255), st.binary(min_size=3, max_size=3)),
        min_size=1,
        max_size=8,
    )
)
def test_fast_reply_round_trip(parts):
    fast = [FastStatusPart(i, e, d) for i, e, d in parts]
    (packet,) = PacketDecoder(2, PacketKind.STATUS).feed(encode_fast_status(fast))
    assert split_fast_status(packet, [3] * len(fast)) == fast
