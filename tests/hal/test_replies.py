"""ReplyCollector: sorting the bytes after a group read, without any I/O."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbot.hal.backend import BusCounters
from hilbot.hal.dynamixel.bus import (
    ReplyCollector,
    ServoReply,
    WholeReply,
    command_failed,
    plain,
    read_packet,
)
from hilbot.hal.dynamixel.protocol import (
    FastStatusPart,
    StatusPacket,
    crc16,
    encode_fast_status,
    encode_status,
)
from hilbot.hal.dynamixel.timing import ReadMethod
from hilbot.hal.errors import ServoError

READS = [(1, 132, 4), (2, 132, 4), (3, 132, 4)]


def collector(fast=False):
    return ReplyCollector(2, READS, fast=fast, counters=BusCounters())


def status(servo_id, data=b"\x00\x08\x00\x00", error=0):
    return encode_status(StatusPacket(2, servo_id, error, data))


def test_valid_corrupt_and_short_replies_are_sorted():
    c = collector()
    bad = bytearray(status(2))
    bad[-1] ^= 0xFF
    c.feed(status(1) + bytes(bad) + status(3, b"\x01"))
    assert c.complete
    replies, corrupt = c.finish()
    assert replies == {1: ServoReply(1, b"\x00\x08\x00\x00", 0)}
    assert corrupt == {2, 3}
    assert c.counters.crc_errors == 2


def test_unrequested_ids_are_ignored_and_alerts_kept():
    c = collector()
    c.feed(status(9) + status(1, error=0x80))
    replies, _ = c.finish()
    assert replies[1].error == 0x80
    assert not c.complete


def test_a_command_error_raises_with_the_servo():
    c = collector()
    with pytest.raises(ServoError) as err:
        c.feed(status(2, b"", error=0x07))
    assert err.value.servo_id == 2
    assert err.value.reason == "access error"
    assert c.counters.servo_errors == 1


def test_fast_reply_whole_and_truncated():
    parts = [FastStatusPart(i, 0, bytes([i, 0, 0, 0])) for i in (1, 2, 3)]
    c = collector(fast=True)
    c.feed(encode_fast_status(parts))
    assert c.complete
    assert set(c.finish()[0]) == {1, 2, 3}
    c = collector(fast=True)
    c.feed(encode_fast_status(parts[:2], announced=[4, 4, 4]))
    assert not c.complete
    replies, corrupt = c.finish()
    assert set(replies) == {1, 2}
    assert corrupt == set()


def test_read_packets_and_plain_retries():
    assert read_packet(2, ReadMethod.FAST_SYNC_READ, READS).instruction.name == "FAST_SYNC_READ"
    assert read_packet(1, ReadMethod.READ_EACH, READS[:1]).id == 1
    assert plain(ReadMethod.FAST_BULK_READ) is ReadMethod.BULK_READ
    assert plain(ReadMethod.READ_EACH) is ReadMethod.READ_EACH


@pytest.mark.parametrize("protocol", [1, 2])
def test_command_failed_is_a_non_zero_error_code_for_every_err_byte(protocol):
    for error in range(256):
        expected = bool(int(StatusPacket(protocol, 1, error).error_code))
        assert command_failed(protocol, error) is expected, hex(error)


def _outcome(fast, reads, chunks):
    counters = BusCounters()
    c = ReplyCollector(2, reads, fast=fast, counters=counters)
    try:
        for chunk in chunks:
            c.feed(chunk)
        got = ("done", c.finish(), c.complete)
    except ServoError as exc:
        got = ("servo error", exc.servo_id, exc.error, dict(c.replies))
    return got, counters


@st.composite
def group_replies(draw):
    """A group read and the bytes that answer it: valid, or with one thing wrong."""
    ids = draw(st.lists(st.integers(1, 20), min_size=1, max_size=6, unique=True))
    reads = [(i, 132, draw(st.integers(1, 6))) for i in ids]
    fast = draw(st.booleans())
    flaws = ["none", "flipped byte", "cut short", "other id", "stuffing", "sent unstuffed"]
    flaw = draw(st.sampled_from(flaws))
    errors = (
        st.sampled_from([0, 0x80]) if flaw != "none" else st.sampled_from([0, 0x80, 0x07, 0x81])
    )
    payloads = []
    for i, _, n in reads:
        data = draw(st.binary(min_size=n, max_size=n))
        payloads.append((i, draw(errors), data))
    k = draw(st.integers(0, len(payloads) - 1))
    i, err, data = payloads[k]
    if flaw == "other id":
        payloads[k] = (21, err, data)
    elif flaw in ("stuffing", "sent unstuffed"):
        payloads[k] = (i, err, (data + b"\xff\xff\xfd\xfd")[-len(data) - 4 :])
        reads[k] = (i, 132, len(payloads[k][2]))
    if fast:
        wire = bytearray(encode_fast_status([FastStatusPart(*p) for p in payloads]))
    else:
        wire = bytearray(b"".join(encode_status(StatusPacket(2, *p)) for p in payloads))
    if flaw == "sent unstuffed" and not fast:  # a servo that forgot to stuff FF FF FD
        frames = [encode_status(StatusPacket(2, *p)) for p in payloads]
        i, err, data = payloads[k]
        body = bytes((i, len(data) + 4, 0, 0x55, err)) + data
        frames[k] = (
            b"\xff\xff\xfd\x00" + body + crc16(b"\xff\xff\xfd\x00" + body).to_bytes(2, "little")
        )
        wire = bytearray(b"".join(frames))
    if flaw == "flipped byte":
        wire[draw(st.integers(0, len(wire) - 1))] ^= draw(st.integers(1, 255))
    elif flaw == "cut short":
        del wire[draw(st.integers(0, len(wire) - 1)) :]
    return fast, reads, bytes(wire)


@settings(max_examples=400)
@given(group_replies())
def test_a_reply_in_one_chunk_sorts_as_one_framed_packet_by_packet(case):
    # one chunk takes the in-place check where it applies; a first byte on its own
    # forces the packet decoder for the rest
    fast, reads, wire = case
    assert _outcome(fast, reads, [wire]) == _outcome(fast, reads, [wire[:1], wire[1:]])


def test_a_whole_valid_reply_in_one_chunk_is_taken_without_framing():
    reads = [(i, 132, 4) for i in range(1, 7)]
    wire = b"".join(status(i, bytes((i, 0, 0, 0)), error=0x80 * (i == 3)) for i in range(1, 7))
    c = ReplyCollector(2, reads, fast=False, counters=BusCounters())
    c.feed(wire)
    assert c.complete
    assert c.finish() == (
        {i: ServoReply(i, bytes((i, 0, 0, 0)), 0x80 * (i == 3)) for i in range(1, 7)},
        set(),
    )


def _outcome_1(reads, chunks):
    counters = BusCounters()
    c = ReplyCollector(1, reads, fast=False, counters=counters)
    try:
        for chunk in chunks:
            c.feed(chunk)
        got = ("done", c.finish(), c.complete)
    except ServoError as exc:
        got = ("servo error", exc.servo_id, exc.error, dict(c.replies))
    return got, counters


@st.composite
def protocol1_replies(draw):
    """A Protocol 1.0 read (or bulk read) and its status packets, valid or with a flaw."""
    ids = draw(st.lists(st.integers(1, 20), min_size=1, max_size=6, unique=True))
    reads = [(i, 36, draw(st.integers(1, 8))) for i in ids]
    flaw = draw(st.sampled_from(["none", "flipped byte", "cut short", "other id"]))
    # hardware bits (overheating 0x04) pass; Angle Limit 0x02 rejects the instruction
    errors = st.sampled_from([0, 0x04, 0x02, 0x24])
    frames = []
    for k, (i, _, n) in enumerate(reads):
        servo_id = 21 if flaw == "other id" and k == len(reads) - 1 else i
        data = draw(st.binary(min_size=n, max_size=n))
        frames.append(encode_status(StatusPacket(1, servo_id, draw(errors), data)))
    wire = bytearray(b"".join(frames))
    if flaw == "flipped byte":
        wire[draw(st.integers(0, len(wire) - 1))] ^= draw(st.integers(1, 255))
    elif flaw == "cut short":
        del wire[draw(st.integers(0, len(wire) - 1)) :]
    return reads, bytes(wire)


@settings(max_examples=400)
@given(protocol1_replies())
def test_a_protocol1_reply_in_one_chunk_sorts_as_framed_packet_by_packet(case):
    # the in-place check for 1.0 status packets gives what the packet decoder gives
    reads, wire = case
    assert _outcome_1(reads, [wire]) == _outcome_1(reads, [wire[:1], wire[1:]])


def test_a_whole_protocol1_reply_is_taken_in_place_and_keeps_hardware_bits():
    reads = [(1, 36, 2), (2, 36, 2)]
    wire = encode_status(StatusPacket(1, 1, 0x04, b"\x00\x02")) + encode_status(
        StatusPacket(1, 2, 0, b"\xff\x03")
    )
    assert WholeReply(1, reads, fast=False).take(wire) == {
        1: ServoReply(1, b"\x00\x02", 0x04),
        2: ServoReply(2, b"\xff\x03", 0),
    }
    bad = wire[:-1] + bytes((wire[-1] ^ 1,))
    assert WholeReply(1, reads, fast=False).take(bad) is None
