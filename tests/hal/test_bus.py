"""DynamixelBus and BlockingPortHandler on the virtual bus: group reads, deadlines, errors."""

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbot.hal.bus.port import BlockingPortHandler, latency_timer_ms
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.protocol import (
    BROADCAST_ID,
    Instruction,
    InstructionPacket,
    encode_instruction,
    sync_write_params,
)
from hilbot.hal.dynamixel.timing import ReadMethod
from hilbot.hal.errors import CommError, CommResult, CommTimeout, PortError, ServoError


@pytest.fixture
def bus(open_bus):
    vbus = open_bus(
        {1: "XM430-W350", 2: "XL430-W250", 3: "XL330-M288"}, initial_positions={2: 1000}
    )
    b = DynamixelBus(vbus.port, 1_000_000, 2, retries=1, margin_ms=100)
    b.open()
    yield vbus, b
    b.close()


@pytest.mark.parametrize("method", [ReadMethod.BULK_READ, ReadMethod.FAST_BULK_READ])
def test_bulk_reads_of_different_spans(bus, method):
    _, b = bus
    reads = [(1, 132, 4), (2, 126, 10), (3, 146, 1)]
    replies = b.group_read(method, reads)
    assert set(replies) == {1, 2, 3}
    assert int.from_bytes(replies[1].data, "little") == 2048
    assert int.from_bytes(replies[2].data[6:10], "little") == 1000  # position in the 126.. span
    assert 0 < replies[3].data[0] < 100  # °C


@pytest.mark.parametrize("method", list(ReadMethod))
def test_every_read_method_reads_positions(bus, method):
    _, b = bus
    replies = b.group_read(method, [(i, 132, 4) for i in (1, 2, 3)])
    assert [int.from_bytes(replies[i].data, "little") for i in (1, 2, 3)] == [2048, 1000, 2048]


def test_single_servo_instructions(bus):
    vbus, b = bus
    assert b.ping(2) == 1060
    assert b.try_ping(9) is None
    data, error = b.read(1, 7, 1)
    assert (data, error) == (b"\x01", 0)
    with pytest.raises(ServoError) as err:
        b.write(1, 132, b"\x00\x00\x00\x00")  # Present Position is read-only
    assert err.value.servo_id == 1
    assert err.value.instruction == "WRITE"
    assert b.counters.servo_errors == 1
    with pytest.raises(CommTimeout) as timeout:
        b.read(9, 7, 1)
    assert timeout.value.servo_id == 9
    assert b.counters.retries >= 1
    assert b.broadcast_ping() == {
        1: (1020, vbus.servo(1).firmware),
        2: (1060, vbus.servo(2).firmware),
        3: (1200, vbus.servo(3).firmware),
    }


def test_protocol1_has_no_reboot_or_broadcast_ping(open_bus):
    vbus = open_bus({1: "AX-12A"}, protocol=1)
    b = DynamixelBus(vbus.port, 1_000_000, 1, margin_ms=100)
    b.open()
    try:
        with pytest.raises(CommError) as err:
            b.reboot(1)
        assert err.value.result is CommResult.NOT_AVAILABLE
        with pytest.raises(CommError):
            b.broadcast_ping()
    finally:
        b.close()


def test_port_deadline_follows_the_reply_size():
    handler = BlockingPortHandler("/dev/null", margin_ms=3.0, latency_ms=1.0)
    handler.tx_time_per_byte = 0.01  # [ms] at 1 Mbps, as setupPort computes it
    handler.setPacketTimeout(100)
    assert handler.packet_timeout == pytest.approx(100 * 0.01 + 1.0 + 3.0)
    # the stock handler's fixed term: 2 x 16 ms + 2 ms
    assert handler.packet_timeout < 34.0


def test_read_port_returns_what_arrived_by_the_deadline():
    master, slave = os.openpty()
    try:
        handler = BlockingPortHandler(os.ttyname(slave), latency_ms=0.0)
        handler.openPort()
        os.write(master, b"\x01\x02\x03")
        handler.set_deadline(0.05)
        start = time.monotonic()
        assert handler.readPort(10) == b"\x01\x02\x03"
        assert time.monotonic() - start >= 0.04  # it waited for the rest until the deadline
        os.write(master, b"\x04\x05")
        handler.set_deadline(1.0)
        assert handler.readPort(2) == b"\x04\x05"  # returns as soon as the bytes are in
        handler.closePort()
    finally:
        os.close(master)
        os.close(slave)


def test_bad_port_and_latency_timer():
    with pytest.raises(PortError) as err:
        DynamixelBus("/dev/does-not-exist", 1_000_000).open()
    assert err.value.port == "/dev/does-not-exist"
    assert latency_timer_ms("/dev/does-not-exist") is None
    with pytest.raises(ValueError, match="protocol"):
        DynamixelBus("/dev/null", 1_000_000, 3)


_GOAL_BYTES = st.sampled_from([b"\xff", b"\xfd", b"\x00", b"\x01", b"\x7f"])


@settings(max_examples=300, deadline=None)
@given(
    protocol=st.sampled_from([1, 2]),
    address=st.sampled_from([0, 64, 116, 255]),
    length=st.sampled_from([1, 2, 4]),
    ids=st.lists(st.integers(0, 252), min_size=1, max_size=8, unique=True),
    data=st.data(),
)
def test_sync_write_packet_is_the_codec_packet(protocol, address, length, ids, data):
    # the bus encodes goal packets from a cached start; bytes like FF FF FD make the
    # codec stuff the payload, and the result must still be the codec's packet
    goals = {
        i: b"".join(data.draw(st.lists(_GOAL_BYTES, min_size=length, max_size=length))) for i in ids
    }
    b = DynamixelBus("unused", 1_000_000, protocol)
    params = sync_write_params(protocol, address, length, goals)
    expected = encode_instruction(
        InstructionPacket(protocol, BROADCAST_ID, Instruction.SYNC_WRITE, params)
    )
    assert b.sync_write_packet(address, length, goals) == expected
    assert b.sync_write_packet(address, length, goals) == expected  # from the cache too
    with pytest.raises(ValueError, match="expected"):
        b.sync_write_packet(address, length, {ids[0]: bytes(length + 1)})


def test_a_group_read_hands_over_the_bus_once_its_reply_is_in(bus):
    # on_sent runs once the instruction is out, on_reply once the whole reply is in, before
    # decoding; a reply that never completes (a missing servo) never calls on_reply
    _, b = bus
    calls = []
    b.on_sent = lambda: calls.append(("sent", b.counters.transactions))
    b.on_reply = lambda: calls.append(("reply", b.counters.transactions))
    for method in (ReadMethod.SYNC_READ, ReadMethod.FAST_SYNC_READ, ReadMethod.BULK_READ):
        calls.clear()
        b.group_read(method, [(i, 132, 4) for i in (1, 2, 3)])
        n = b.counters.transactions
        assert calls == [("sent", n), ("reply", n)]
    calls.clear()
    b.group_read(ReadMethod.READ_EACH, [(i, 132, 4) for i in (1, 2, 3)])
    assert [c[0] for c in calls] == ["sent"] * 3
    calls.clear()
    b.retries = 0
    with pytest.raises(CommTimeout):
        b.group_read(ReadMethod.FAST_SYNC_READ, [(i, 132, 4) for i in (1, 2, 3, 9)])
    assert [c[0] for c in calls] == ["sent"]
