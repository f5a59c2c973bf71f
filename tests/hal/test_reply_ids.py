"""A reply from another id than the one asked for is refused, never taken as that servo's.

The virtual buses re-address a servo's replies at the byte level (``faults(id).reply_id``):
the status packet, or its Fast Sync Read slice, carries the other id under a valid CRC or
checksum. The real buses refuse it as ``WrongReplyId`` naming both ids, counted and
retried like a corrupt reply; its data becomes no servo's reading.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.timing import ReadMethod
from hilbot.hal.errors import CrcError, WrongReplyId
from hilbot.hal.feetech.bus import FeetechBus
from hilbot.sim import running_virtual_bus
from hilbot.sim.virtual_bus import running_feetech_bus

MARGIN_MS = 300.0  # a busy machine: late replies are not lost ones
POSITIONS = {1: 1000, 2: 2000, 3: 3000}  # each servo's reading tells whose it is


def position(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)


@pytest.fixture
def dxl(request: pytest.FixtureRequest) -> Iterator[tuple[object, DynamixelBus]]:
    """A virtual bus of three servos (Protocol 2.0 or 1.0) and a DynamixelBus on it."""
    protocol = getattr(request, "param", 2)
    model = "XM430-W350" if protocol == 2 else "MX-28"
    with running_virtual_bus(
        dict.fromkeys(POSITIONS, model),
        protocol=protocol,
        return_delay_time=0,
        initial_positions=POSITIONS,
    ) as vbus:
        bus = DynamixelBus(vbus.port, 1_000_000, protocol, retries=1, margin_ms=MARGIN_MS)
        bus.open()
        try:
            yield vbus, bus
        finally:
            bus.close()
        assert vbus.errors == []


def check_refused(err: WrongReplyId, expected: int, received: int) -> None:
    assert (err.servo_id, err.expected, err.received) == (expected, expected, received)
    assert f"reply from id {received}, expected id {expected}" in str(err)
    assert isinstance(err, CrcError)


@pytest.mark.parametrize("dxl", [2, 1], indirect=True, ids=["2.0", "1.0"])
def test_a_read_or_ping_answered_by_another_id_is_refused_at_once(dxl):
    vbus, bus = dxl
    address = 132 if bus.protocol == 2 else 36
    size = 4 if bus.protocol == 2 else 2
    vbus.faults(2).reply_id = 3
    with pytest.raises(WrongReplyId) as err:
        bus.read(2, address, size)
    check_refused(err.value, 2, 3)
    assert bus.counters.crc_errors >= 2  # the try and the retry, as corrupt replies
    with pytest.raises(WrongReplyId):
        bus.ping(2)
    vbus.faults(2).clear()
    assert position(bus.read(2, address, size)[0]) == POSITIONS[2]


def test_a_fast_sync_read_slice_under_another_id_is_taken_for_no_servo(dxl):
    vbus, bus = dxl
    reads = [(i, 132, 4) for i in POSITIONS]
    vbus.faults(3).reply_id = 1  # servo 3's slice says it is servo 1's
    replies, pending, corrupt = bus.group_read_partial(ReadMethod.FAST_SYNC_READ, reads)
    assert {i: position(r.data) for i, r in replies.items()} == {1: 1000, 2: 2000}
    assert pending == [3] and corrupt == {3}
    with pytest.raises(WrongReplyId) as err:  # and again on the plain retry
        bus.group_read(ReadMethod.FAST_SYNC_READ, reads)
    check_refused(err.value, 3, 1)
    vbus.faults(3).clear()
    got = bus.group_read(ReadMethod.FAST_SYNC_READ, reads)
    assert {i: position(r.data) for i, r in got.items()} == POSITIONS


@pytest.mark.parametrize("other", [9, 3, 1], ids=["id-not-asked", "later-servo", "earlier-servo"])
def test_a_sync_read_status_under_another_id_is_taken_for_no_servo(dxl, other):
    vbus, bus = dxl
    reads = [(i, 132, 4) for i in POSITIONS]
    vbus.faults(2).reply_id = other  # 1, then servo 2's reply as `other`, then 3
    replies, pending, corrupt = bus.group_read_partial(ReadMethod.SYNC_READ, reads)
    assert all(position(r.data) == POSITIONS[i] for i, r in replies.items())
    assert 2 in pending and 2 in corrupt
    with pytest.raises(WrongReplyId) as err:
        bus.group_read(ReadMethod.SYNC_READ, reads)
    check_refused(err.value, 2, other)


@pytest.mark.parametrize("dxl", [1], indirect=True, ids=["1.0"])
@pytest.mark.parametrize("method", [ReadMethod.BULK_READ, ReadMethod.READ_EACH])
def test_protocol_1_group_reads_refuse_another_id(dxl, method):
    vbus, bus = dxl
    reads = [(i, 36, 2) for i in POSITIONS]
    vbus.faults(1).reply_id = 2
    with pytest.raises(WrongReplyId) as err:
        bus.group_read(method, reads)
    check_refused(err.value, 1, 2)


# ---------------------------------------------------------------------- Feetech


@pytest.fixture
def feetech() -> Iterator[tuple[object, FeetechBus]]:
    with running_feetech_bus(
        dict.fromkeys(POSITIONS, "STS3215"), return_delay_time=0, initial_positions=POSITIONS
    ) as vbus:
        bus = FeetechBus(vbus.port, 1_000_000, retries=1, margin_ms=MARGIN_MS)
        bus.open()
        try:
            yield vbus, bus
        finally:
            bus.close()
        assert vbus.errors == []


def test_a_feetech_read_answered_by_another_id_is_refused(feetech):
    vbus, bus = feetech
    vbus.faults(2).reply_id = 3
    with pytest.raises(WrongReplyId) as err:
        bus.read(2, 56, 2)
    check_refused(err.value, 2, 3)
    assert bus.counters.crc_errors >= 2
    vbus.faults(2).clear()
    assert position(bus.read(2, 56, 2)[0]) == POSITIONS[2]


@pytest.mark.parametrize("other", [9, 3, 1], ids=["id-not-asked", "later-servo", "earlier-servo"])
def test_a_feetech_sync_read_reply_under_another_id_is_refused(feetech, other):
    vbus, bus = feetech
    vbus.faults(2).reply_id = other
    with pytest.raises(WrongReplyId) as err:
        bus.sync_read(56, 2, list(POSITIONS))
    check_refused(err.value, 2, other)
    vbus.faults(2).clear()
    got = bus.sync_read(56, 2, list(POSITIONS))
    assert {i: position(data) for i, (data, _) in got.items()} == POSITIONS
