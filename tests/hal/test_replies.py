"""ReplyCollector: sorting the bytes after a group read, without any I/O."""

import pytest

from hilbot.hal.backend import BusCounters
from hilbot.hal.dynamixel.protocol import (
    FastStatusPart,
    StatusPacket,
    encode_fast_status,
    encode_status,
)
from hilbot.hal.dynamixel.replies import ReplyCollector, ServoReply, plain, read_packet
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
