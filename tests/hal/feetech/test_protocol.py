"""The Feetech codec against the golden packets of Feetech's protocol manual."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.feetech import protocol as p
from hilbot.hal.feetech.bus import sync_write_packet


def _hex(text: str) -> bytes:
    return bytes.fromhex(text)


# Examples of the FT-SCS communication protocol user manual, sections 1.3.1 ~ 1.3.8.
GOLDEN_INSTRUCTIONS = [
    ("ping", p.ping(1), "FF FF 01 02 01 FB"),
    ("read", p.read(1, 0x38, 2), "FF FF 01 04 02 38 02 BE"),
    ("write broadcast id", p.write(p.BROADCAST_ID, 0x05, b"\x01"), "FF FF FE 04 03 05 01 F4"),
    (
        "write position and speed",
        p.write(1, 0x2A, _hex("00 08 00 00 E8 03")),
        "FF FF 01 09 03 2A 00 08 00 00 E8 03 D5",
    ),
    (
        "reg write",
        p.reg_write(1, 0x2A, _hex("00 08 00 00 E8 03")),
        "FF FF 01 09 04 2A 00 08 00 00 E8 03 D4",
    ),
    ("action", p.action(), "FF FF FE 02 05 FA"),
    (
        "sync write",
        p.sync_write(0x2A, 6, [(i, _hex("00 08 00 00 E8 03")) for i in (1, 2, 3, 4)]),
        "FF FF FE 20 83 2A 06 01 00 08 00 00 E8 03 02 00 08 00 00 E8 03"
        " 03 00 08 00 00 E8 03 04 00 08 00 00 E8 03 58",
    ),
    ("sync read", p.sync_read(0x38, 8, [1, 2]), "FF FF FE 06 82 38 08 01 02 36"),
    ("factory reset", p.factory_reset(1), "FF FF 01 02 06 F6"),
]

GOLDEN_STATUS = [
    ("ping/write reply", p.StatusPacket(1, 0), "FF FF 01 02 00 FC"),
    ("read reply", p.StatusPacket(1, 0, _hex("18 05")), "FF FF 01 04 00 18 05 DD"),
    (
        "sync read reply 1",
        p.StatusPacket(1, 0, _hex("00 08 00 00 00 00 79 1E")),
        "FF FF 01 0A 00 00 08 00 00 00 00 79 1E 55",
    ),
    (
        "sync read reply 2",
        p.StatusPacket(2, 0, _hex("FF 07 00 00 00 00 77 23")),
        "FF FF 02 0A 00 FF 07 00 00 00 00 77 23 53",
    ),
]


@pytest.mark.parametrize(
    ("packet", "golden"),
    [g[1:] for g in GOLDEN_INSTRUCTIONS],
    ids=[g[0] for g in GOLDEN_INSTRUCTIONS],
)
def test_instruction_golden(packet: p.InstructionPacket, golden: str) -> None:
    assert p.encode_instruction(packet) == _hex(golden)
    decoder = p.PacketDecoder(p.PacketKind.INSTRUCTION)
    assert decoder.feed(_hex(golden)) == [packet]


@pytest.mark.parametrize(
    ("packet", "golden"), [g[1:] for g in GOLDEN_STATUS], ids=[g[0] for g in GOLDEN_STATUS]
)
def test_status_golden(packet: p.StatusPacket, golden: str) -> None:
    assert p.encode_status(packet) == _hex(golden)
    assert p.PacketDecoder(p.PacketKind.STATUS).feed(_hex(golden)) == [packet]


def test_read_reply_value_is_the_manuals() -> None:
    (reply,) = p.PacketDecoder(p.PacketKind.STATUS).feed(_hex("FF FF 01 04 00 18 05 DD"))
    assert isinstance(reply, p.StatusPacket)
    assert int.from_bytes(reply.params, "little") == 1304  # "Position = 0x0518"


def test_sync_parsers_invert_builders() -> None:
    packet = p.sync_read(0x38, 8, [1, 2])
    assert p.parse_sync_read(packet.params) == p.SyncRead(0x38, 8, (1, 2))
    entries = ((1, b"\x00\x08"), (7, b"\xff\x0f"))
    write = p.sync_write(42, 2, entries)
    assert p.parse_sync_write(write.params) == p.SyncWrite(42, 2, entries)


@pytest.mark.parametrize(
    "params", [b"", b"\x2a", b"\x2a\x02\x01\x00"], ids=["empty", "no length", "short entry"]
)
def test_sync_write_parser_refuses_malformed(params: bytes) -> None:
    with pytest.raises(ValueError, match="sync write"):
        p.parse_sync_write(params)


def test_builders_refuse_bad_fields() -> None:
    with pytest.raises(ValueError, match="servo id"):
        p.sync_read(56, 2, [254])
    with pytest.raises(ValueError, match="expected 2"):
        p.sync_write(42, 2, [(1, b"\x00")])
    with pytest.raises(ValueError, match="address"):
        p.read(1, 256, 2)
    with pytest.raises(ValueError, match="longer than"):
        p.encode_instruction(p.write(1, 0, bytes(250)))


def test_the_bus_sync_write_packet_is_the_manual_packet() -> None:
    goals = {i: _hex("00 08 00 00 E8 03") for i in (1, 2, 3, 4)}
    assert sync_write_packet(0x2A, 6, goals) == _hex(
        "FF FF FE 20 83 2A 06 01 00 08 00 00 E8 03 02 00 08 00 00 E8 03"
        " 03 00 08 00 00 E8 03 04 00 08 00 00 E8 03 58"
    )


@pytest.mark.parametrize(
    ("address", "goals", "match"),
    [
        (42, {}, "at least one servo"),
        (42, {1: b"\x00"}, "expected 2"),
        (42, {254: b"\x00\x00"}, "servo id"),
        (256, {1: b"\x00\x00"}, "address"),
    ],
    ids=["no servo", "short entry", "broadcast id", "address"],
)
def test_the_bus_sync_write_packet_names_a_bad_field(address, goals, match) -> None:
    with pytest.raises(ValueError, match=match):
        sync_write_packet(address, 2, goals)


def test_decoder_checksum_error_and_resync() -> None:
    good = p.encode_status(p.StatusPacket(3, 0, b"\x01\x02"))
    bad = good[:-1] + bytes((good[-1] ^ 0xFF,))
    decoder = p.PacketDecoder(p.PacketKind.STATUS)
    out = decoder.feed(b"\x00\x13" + bad + b"\xff" + good)
    assert out == [
        p.DecodeError(p.DecodeErrorReason.CHECKSUM, 3, bad),
        p.StatusPacket(3, 0, b"\x01\x02"),
    ]
    assert decoder.pending == 0


def test_decoder_skips_status_with_impossible_error_byte() -> None:
    # The SDK drops a byte and resyncs when ID > 0xFD or ERROR > 0x7F.
    good = p.encode_status(p.StatusPacket(1, 0))
    decoder = p.PacketDecoder(p.PacketKind.STATUS)
    assert decoder.feed(b"\xff\xff\x01\x02\x80" + good) == [p.StatusPacket(1, 0)]


@given(
    st.integers(0, p.BROADCAST_ID),
    st.integers(0, 0xFF),
    st.binary(max_size=p.MAX_PACKET - p.OVERHEAD),
    st.integers(1, 9),
)
def test_instruction_round_trip_in_any_chunks(
    pid: int, code: int, params: bytes, chunk: int
) -> None:
    packet = p.InstructionPacket(pid, code, params)
    data = p.encode_instruction(packet)
    decoder = p.PacketDecoder(p.PacketKind.INSTRUCTION)
    out = []
    for k in range(0, len(data), chunk):
        out += decoder.feed(data[k : k + chunk])
    assert out == [packet]


@given(st.integers(0, p.MAX_ID), st.integers(0, 0x7F), st.binary(max_size=40))
def test_status_round_trip(pid: int, error: int, params: bytes) -> None:
    packet = p.StatusPacket(pid, error, params)
    assert p.PacketDecoder(p.PacketKind.STATUS).feed(p.encode_status(packet)) == [packet]


def test_status_bits_are_the_sdks() -> None:
    # scservo_sdk ERRBIT_VOLTAGE 1, ANGLE 2, OVERHEAT 4, OVERELE 8, OVERLOAD 32
    assert [int(b) for b in p.StatusError if b] == [1, 2, 4, 8, 32]
    assert p.StatusError(0x21).describe() == "voltage, overload"


def test_status_bits_map_to_common_flags_and_back() -> None:
    every = p.StatusError.VOLTAGE | p.StatusError.ANGLE_SENSOR | p.StatusError.OVERHEAT
    every |= p.StatusError.OVERCURRENT | p.StatusError.OVERLOAD
    flags = p.hardware_flags(int(every) | 0x40)  # bit 6 is reserved: dropped
    assert flags == (
        HardwareErrorFlags.INPUT_VOLTAGE
        | HardwareErrorFlags.MOTOR_ENCODER
        | HardwareErrorFlags.OVERHEATING
        | HardwareErrorFlags.ELECTRICAL_SHOCK
        | HardwareErrorFlags.OVERLOAD
    )
    assert p.status_error(flags) == every


_noise = st.binary(max_size=12).map(lambda b: bytes(x for x in b if x != 0xFF))
_status = st.builds(
    p.StatusPacket, st.integers(0, p.MAX_ID), st.integers(0, 0x7F), st.binary(max_size=20)
)


@given(st.lists(st.tuples(_noise, _status), max_size=6), _noise)
def test_decoder_resyncs_through_noise(
    items: list[tuple[bytes, p.StatusPacket]], tail: bytes
) -> None:
    stream = b"".join(noise + p.encode_status(packet) for noise, packet in items) + tail
    assert p.PacketDecoder(p.PacketKind.STATUS).feed(stream) == [packet for _, packet in items]


@given(st.lists(st.binary(max_size=64), max_size=8))
def test_decoder_never_raises_and_holds_at_most_one_frame(chunks: list[bytes]) -> None:
    decoder = p.PacketDecoder(p.PacketKind.INSTRUCTION)
    for chunk in chunks:
        for item in decoder.feed(chunk):
            assert isinstance(item, p.InstructionPacket | p.DecodeError)
        assert decoder.pending < p.MAX_PACKET
