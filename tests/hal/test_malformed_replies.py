"""Short, well-formed replies (the virtual bus's ``truncate`` fault) never leak SDK errors.

dynamixel-sdk indexes a status packet's data without checking its length: a reply cut
short but with a valid CRC made ``PacketHandler.ping`` (Protocol 1.0) raise a raw
``IndexError`` out of ``hilbot run``. Every SDK call goes through ``DynamixelBus``,
which turns that into :class:`MalformedReply` (a ``CrcError``: retried, counted, named
by servo and instruction), so start-up, the tools and the cycle see typed errors only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dynamixel_sdk import COMM_SUCCESS, PacketHandler, PortHandler

from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.tools import scan
from hilbot.hal.errors import CrcError, MalformedReply, StartupError, StartupProblem


@pytest.fixture
def sdk_port() -> Iterator:
    """``sdk_port(vbus)``: the stock SDK's port handler opened on a virtual bus."""
    opened: list[PortHandler] = []

    def open_port(vbus) -> PortHandler:
        port = PortHandler(vbus.port)
        assert port.openPort() and port.setBaudRate(vbus.baudrate)
        opened.append(port)
        return port

    yield open_port
    for port in opened:
        port.closePort()


def test_the_stock_sdk_raises_index_error_on_a_short_protocol1_reply(open_bus, sdk_port):
    """The bug as it was: the SDK's own ping indexes the missing model number byte."""
    vbus = open_bus({3: "AX-12A"}, protocol=1)
    vbus.faults(3).truncate_rate = 1.0  # replies without data: its slice [5:7] is 1 byte
    with pytest.raises(IndexError):
        PacketHandler(1.0).ping(sdk_port(vbus), 3)  # data_read[1]


def test_the_stock_sdk_reads_a_short_reply_s_checksum_as_data(open_bus, sdk_port):
    vbus = open_bus({3: "AX-12A"}, protocol=1)
    vbus.faults(3).truncate_rate = 1.0
    vbus.faults(3).truncate_keep = 1
    data, result, _ = PacketHandler(1.0).readTxRx(sdk_port(vbus), 3, 0, 2)
    assert result == COMM_SUCCESS and len(data) == 2  # 1 data byte + the checksum


@pytest.mark.parametrize("protocol, model", [(1, "AX-12A"), (2, "XM430-W350")], ids=["1.0", "2.0"])
@pytest.mark.parametrize("keep", [0, 1])
def test_a_short_ping_reply_is_a_malformed_reply(open_bus, protocol, model, keep):
    vbus = open_bus({3: model}, protocol=protocol)
    faults = vbus.faults(3)
    faults.truncate_rate, faults.truncate_keep = 1.0, keep
    bus = DynamixelBus(vbus.port, 1_000_000, protocol, retries=1, margin_ms=100.0)
    bus.open()
    try:
        with pytest.raises(MalformedReply) as err:
            bus.ping(3)
        assert err.value.servo_id == 3
        assert err.value.instruction == "PING"
        assert "bytes" in err.value.detail
        assert bus.counters.crc_errors == 2  # the try and the retry
        assert bus.counters.retries == 1
        assert bus.try_ping(3) is None  # a probe treats it as "nothing valid answered"
        faults.clear()
        assert bus.ping(3) == vbus.servo(3).spec.model_number
    finally:
        bus.close()


@pytest.mark.parametrize("protocol, model", [(1, "AX-12A"), (2, "XM430-W350")], ids=["1.0", "2.0"])
def test_a_short_read_reply_is_a_malformed_reply(open_bus, protocol, model):
    vbus = open_bus({3: model}, protocol=protocol)
    vbus.faults(3).truncate_rate = 1.0
    vbus.faults(3).truncate_keep = 1
    bus = DynamixelBus(vbus.port, 1_000_000, protocol, retries=1, margin_ms=100.0)
    bus.open()
    try:
        with pytest.raises(MalformedReply) as err:
            bus.read(3, 0, 2)
        assert (err.value.servo_id, err.value.instruction) == (3, "READ")
        assert bus.counters.crc_errors >= 1
    finally:
        bus.close()


@pytest.mark.parametrize("protocol, model", [(1, "MX-28"), (2, "XM430-W350")], ids=["1.0", "2.0"])
async def test_start_up_with_a_servo_that_only_gives_short_replies(
    open_bus, backend_for, chain, protocol, model
):
    servos = chain(model, 3)
    vbus = open_bus(servos, protocol=protocol)
    vbus.faults(2).truncate_rate = 1.0
    vbus.faults(2).truncate_keep = 1  # the stock SDK took the CRC for a model number
    with pytest.raises(StartupError) as err:
        async with backend_for(vbus, servos, protocol=protocol):
            pass
    assert err.value.servo_id == 2
    assert err.value.problem is StartupProblem.MISSING  # nothing valid ever answered


@pytest.mark.parametrize("protocol, model", [(1, "MX-28"), (2, "XM430-W350")], ids=["1.0", "2.0"])
async def test_start_up_rides_over_occasional_short_replies(
    open_bus, backend_for, chain, protocol, model
):
    """A freshly started bus that garbles a few replies: retried, counted, no raw error."""
    servos = chain(model, 3)
    vbus = open_bus(servos, protocol=protocol, seed=5)
    vbus.faults(1).truncate_rate = 0.3
    try:
        async with backend_for(vbus, servos, protocol=protocol, retries=3) as arm:
            vbus.faults(1).clear()
            await arm.read()
    except (StartupError, CrcError) as exc:  # typed, naming the servo: also acceptable
        assert getattr(exc, "servo_id", None) == 1


async def test_a_short_reply_in_the_cycle_read_is_a_crc_error(open_bus, backend_for, chain):
    servos = chain("XM430-W350", 3)
    vbus = open_bus(servos)
    async with backend_for(vbus, servos, fast_read=False, retries=1) as arm:
        before = arm.counters
        vbus.faults(3).truncate_rate = 1.0
        with pytest.raises(CrcError) as err:
            await arm.read()
        assert err.value.servo_id == 3
        assert arm.counters.crc_errors - before.crc_errors == 2
        vbus.faults(3).clear()
        await arm.read()


def test_scan_skips_a_servo_whose_replies_are_short(open_bus):
    vbus = open_bus({3: "AX-12A", 5: "AX-12A"}, protocol=1)
    vbus.faults(3).truncate_rate = 1.0
    vbus.faults(3).truncate_keep = 1
    # a generous margin: on a busy machine servo 5's reply can be later than the default 3 ms
    found = scan(vbus.port, [1_000_000], protocols=[1], ids=range(1, 8), margin_ms=100.0)
    assert [f.id for f in found] == [5]
