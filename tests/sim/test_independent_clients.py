"""Clients we did not write drive the virtual bus: raw dynamixel-sdk calls, as ROBOTIS'
example programs make them, and rustypot (pollen-robotics, PyPI). What they read is
checked against the ROBOTIS e-manual values, not against our own tables."""

from collections.abc import Iterator

import pytest
import rustypot
from dynamixel_sdk import (
    COMM_NOT_AVAILABLE,
    COMM_SUCCESS,
    GroupBulkRead,
    GroupBulkWrite,
    GroupSyncRead,
    GroupSyncWrite,
    port_handler,
)

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.tables import Access, model
from hilbot.sim import running_virtual_bus
from hilbot.sim.virtual_bus import VirtualBus
from tests.sim.conftest import Sdk, open_sdk

# Model numbers and defaults from each model's e-manual page (Model Number(0),
# Temperature Limit(31), Current Limit(38), Velocity Limit(44)).
XM, XL430, XL330 = 1020, 1060, 1200
SERVOS = {1: "XM430-W350", 2: "XL430-W250", 3: "XL330-M288"}
NUMBERS = {1: XM, 2: XL430, 3: XL330}
TEMPERATURE_LIMIT = {1: 80, 2: 72, 3: 70}
VELOCITY_LIMIT = {1: 200, 2: 265, 3: 445}
# X-series addresses (e-manual control table).
TEMPERATURE, CURRENT_LIMIT, VELOCITY, MAX_POSITION = 31, 38, 44, 48
TORQUE, LED, POSITION_P, PROFILE_VELOCITY, GOAL, PRESENT = 64, 65, 84, 112, 116, 132
FEEDFORWARD_1ST, BACKUP_READY, INDIRECT_ADDRESS_1, INDIRECT_DATA_1 = 90, 147, 168, 224
DATA_LIMIT_ERROR = 0x06  # e-manual Protocol 2.0, status packet Error field
INSTRUCTION_BIT = 0x40  # e-manual Protocol 1.0, status packet Error bit 6
RANGE_BIT = 0x08  # e-manual Protocol 1.0, status packet Error bit 3
#: rustypot's read timeout [s]: only a failing test waits it out, so it is generous.
TIMEOUT = 1.0


@pytest.fixture(autouse=True)
def very_patient_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply timeout of about a second for the stock SDK (``2 * LATENCY_TIMER + 2`` ms).

    On this shared 2-core machine the bus thread was seen scheduled up to ~0.4 s late
    under a load of 9; no test here expects a timeout, so only a failure waits it out.
    """
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 500)


@pytest.fixture
def bus() -> Iterator[VirtualBus]:
    with running_virtual_bus(SERVOS, return_delay_time=0) as bus:
        yield bus
        assert bus.errors == []


@pytest.fixture
def sdk(bus: VirtualBus) -> Iterator[Sdk]:
    sdk = open_sdk(bus, 2, 1_000_000)
    yield sdk
    sdk.port.closePort()


# ---------------------------------------------------------------- dynamixel-sdk, 2.0


def test_sdk_ping_and_broadcast_ping(sdk):
    for servo_id, number in NUMBERS.items():
        assert sdk.packet.ping(sdk.port, servo_id) == (number, COMM_SUCCESS, 0)
    found, result = sdk.packet.broadcastPing(sdk.port)
    assert result == COMM_SUCCESS
    assert {servo_id: info[0] for servo_id, info in found.items()} == NUMBERS


def test_sdk_reads_1_2_and_4_bytes_the_pages_give(sdk):
    pk, port = sdk.packet, sdk.port
    for servo_id in SERVOS:
        assert pk.read1ByteTxRx(port, servo_id, TEMPERATURE) == (
            TEMPERATURE_LIMIT[servo_id],
            COMM_SUCCESS,
            0,
        )
        assert pk.read4ByteTxRx(port, servo_id, VELOCITY)[0] == VELOCITY_LIMIT[servo_id]
    assert pk.read2ByteTxRx(port, 1, CURRENT_LIMIT) == (1193, COMM_SUCCESS, 0)
    assert pk.read2ByteTxRx(port, 3, CURRENT_LIMIT) == (1750, COMM_SUCCESS, 0)


def test_sdk_writes_1_2_and_4_bytes(sdk):
    pk, port = sdk.packet, sdk.port
    assert pk.write1ByteTxRx(port, 2, LED, 1) == (COMM_SUCCESS, 0)
    assert pk.write2ByteTxRx(port, 2, POSITION_P, 900) == (COMM_SUCCESS, 0)
    assert pk.write4ByteTxRx(port, 2, PROFILE_VELOCITY, 77) == (COMM_SUCCESS, 0)
    assert pk.read1ByteTxRx(port, 2, LED)[0] == 1
    assert pk.read2ByteTxRx(port, 2, POSITION_P)[0] == 900
    assert pk.read4ByteTxRx(port, 2, PROFILE_VELOCITY)[0] == 77


def test_sdk_sees_the_data_limit_error(sdk):
    pk, port = sdk.packet, sdk.port
    assert pk.write4ByteTxRx(port, 1, MAX_POSITION, 3000) == (COMM_SUCCESS, 0)
    before = pk.read4ByteTxRx(port, 1, GOAL)[0]
    assert pk.write4ByteTxRx(port, 1, GOAL, 3500) == (COMM_SUCCESS, DATA_LIMIT_ERROR)
    assert pk.read4ByteTxRx(port, 1, GOAL)[0] == before


def test_sdk_sync_write_sync_read_and_fast_sync_read(sdk):
    pk, port = sdk.packet, sdk.port
    writer = GroupSyncWrite(port, pk, GOAL, 4)
    for servo_id in SERVOS:
        assert writer.addParam(servo_id, list((1000 + servo_id).to_bytes(4, "little")))
    assert writer.txPacket() == COMM_SUCCESS
    reader = GroupSyncRead(port, pk, GOAL, 4)
    for servo_id in SERVOS:
        assert reader.addParam(servo_id)
    assert reader.txRxPacket() == COMM_SUCCESS
    assert {i: reader.getData(i, GOAL, 4) for i in SERVOS} == {1: 1001, 2: 1002, 3: 1003}
    fast = GroupSyncRead(port, pk, PRESENT, 4)
    for servo_id in SERVOS:
        assert fast.addParam(servo_id)
    assert fast.fastSyncRead() == COMM_SUCCESS
    assert all(fast.isAvailable(i, PRESENT, 4) for i in SERVOS)


def test_sdk_bulk_read_and_bulk_write(sdk):
    pk, port = sdk.packet, sdk.port
    writer = GroupBulkWrite(port, pk)
    assert writer.addParam(1, LED, 1, [1])
    assert writer.addParam(2, POSITION_P, 2, list((700).to_bytes(2, "little")))
    assert writer.txPacket() == COMM_SUCCESS
    reader = GroupBulkRead(port, pk)
    assert reader.addParam(1, LED, 1)
    assert reader.addParam(2, POSITION_P, 2)
    assert reader.addParam(3, CURRENT_LIMIT, 2)
    assert reader.txRxPacket() == COMM_SUCCESS
    assert reader.getData(1, LED, 1) == 1
    assert reader.getData(2, POSITION_P, 2) == 700
    assert reader.getData(3, CURRENT_LIMIT, 2) == 1750


def test_sdk_reboot_clears_a_hardware_error(sdk, bus):
    pk, port = sdk.packet, sdk.port
    bus.raise_hardware_error(1, HardwareErrorFlags.OVERLOAD)
    assert pk.ping(port, 1)[2] & 0x80  # the alert bit
    assert pk.reboot(port, 1) == (COMM_SUCCESS, 0x80)
    assert pk.ping(port, 1) == (XM, COMM_SUCCESS, 0)


def test_sdk_factory_reset_keeping_id_and_baud(sdk):
    pk, port = sdk.packet, sdk.port
    assert pk.write4ByteTxRx(port, 2, VELOCITY, 100) == (COMM_SUCCESS, 0)
    assert pk.factoryReset(port, 2, 0x02) == (COMM_SUCCESS, 0)
    assert pk.read4ByteTxRx(port, 2, VELOCITY) == (VELOCITY_LIMIT[2], COMM_SUCCESS, 0)


def test_sdk_backup_ready_feedforward_and_indirection(sdk):
    pk, port = sdk.packet, sdk.port
    assert pk.read1ByteTxRx(port, 1, BACKUP_READY) == (0, COMM_SUCCESS, 0)
    assert pk.write2ByteTxRx(port, 1, FEEDFORWARD_1ST, 250) == (COMM_SUCCESS, 0)
    assert pk.read2ByteTxRx(port, 1, FEEDFORWARD_1ST) == (250, COMM_SUCCESS, 0)
    # Indirect Address 1..4 -> Present Position (132..135): Indirect Data 1 reads it.
    assert pk.read2ByteTxRx(port, 1, INDIRECT_ADDRESS_1) == (INDIRECT_DATA_1, COMM_SUCCESS, 0)
    for i in range(4):
        assert pk.write2ByteTxRx(port, 1, INDIRECT_ADDRESS_1 + 2 * i, PRESENT + i)[1] == 0
    assert pk.read4ByteTxRx(port, 1, INDIRECT_DATA_1) == pk.read4ByteTxRx(port, 1, PRESENT)


# ---------------------------------------------------------------- dynamixel-sdk, 1.0

P1 = {1: "AX-12A", 2: "MX-28", 3: "MX-64"}
P1_NUMBERS = {1: 12, 2: 29, 3: 310}


@pytest.fixture
def sdk1() -> Iterator[Sdk]:
    with running_virtual_bus(P1, protocol=1, return_delay_time=0) as bus:
        sdk = open_sdk(bus, 1, 1_000_000)
        yield sdk
        sdk.port.closePort()
        assert bus.errors == []


def test_sdk_protocol_1(sdk1):
    pk, port = sdk1.packet, sdk1.port
    for servo_id, number in P1_NUMBERS.items():
        assert pk.ping(port, servo_id) == (number, COMM_SUCCESS, 0)
    # CCW Angle Limit(8): 1023 on the AX, 4095 on the MX; Temperature Limit(11).
    assert pk.read2ByteTxRx(port, 1, 8) == (1023, COMM_SUCCESS, 0)
    assert pk.read2ByteTxRx(port, 2, 8) == (4095, COMM_SUCCESS, 0)
    assert [pk.read1ByteTxRx(port, i, 11)[0] for i in P1] == [70, 80, 80]
    assert pk.write1ByteTxRx(port, 1, 25, 1) == (COMM_SUCCESS, 0)  # LED
    assert pk.write2ByteTxRx(port, 1, 32, 1500) == (COMM_SUCCESS, RANGE_BIT)  # joint mode
    writer = GroupSyncWrite(port, pk, 30, 2)
    for servo_id, goal in ((1, 600), (2, 2500), (3, 1500)):
        assert writer.addParam(servo_id, list(goal.to_bytes(2, "little")))
    assert writer.txPacket() == COMM_SUCCESS
    assert [pk.read2ByteTxRx(port, i, 30)[0] for i in P1] == [600, 2500, 1500]
    assert pk.reboot(port, 1) == (COMM_NOT_AVAILABLE, 0)  # 1.0 defines no reboot
    # ... and a servo sent one anyway answers with the instruction error bit.
    reboot = [0xFF, 0xFF, 2, 2, 0x08, 0]  # header, ID, LENGTH, INSTRUCTION, CHECKSUM
    _, result, error = pk.txRxPacket(port, reboot)
    assert (result, error) == (COMM_SUCCESS, INSTRUCTION_BIT)


# ---------------------------------------------------------------- rustypot


def test_rustypot_protocol_2(bus):
    c = rustypot.Xl430PyController(bus.port, 1_000_000, TIMEOUT)
    try:
        assert c.ping(1) and c.ping(2) and not c.ping(9)
        assert c.broadcast_scan([1, 2, 3, 4]) == NUMBERS
        assert [c.read_velocity_limit(i)[0] for i in (1, 2)] == [200, 265]
        # Registers that answered Access Error (and made rustypot 1.13 panic):
        assert c.read_backup_ready(2) == [0]
        assert c.read_indirect_address_1(2) == [INDIRECT_DATA_1]
        assert c.read_indirect_data_1(2) == [0]
        c.write_feedforward_1st_gain(2, 300)
        assert c.read_feedforward_1st_gain(2) == [300]
        c.sync_write_goal_position([1, 2], [1500, 2500])
        assert c.sync_read_goal_position([1, 2]) == [1500, 2500]
        assert c.write_raw_data_with_error(1, MAX_POSITION, list((3000).to_bytes(4, "little"))) == 0
        limit = c.write_raw_data_with_error(1, GOAL, list((3500).to_bytes(4, "little")))
        assert limit == DATA_LIMIT_ERROR
        present = c.sync_read_present_position([1, 2])
        c.set_fast_sync_read(True)
        assert c.sync_read_present_position([1, 2]) == present
        c.reboot(2)
        assert c.ping(2)
        c.write_velocity_limit(2, 100)
        c.factory_reset(2, conserve_id_only=False, conserve_id_and_baudrate=True)
        assert c.read_velocity_limit(2) == [265]
    finally:
        c.close()


def test_rustypot_xl330(bus):
    c = rustypot.Xl330PyController(bus.port, 1_000_000, TIMEOUT)
    try:
        assert c.read_model_number(3) == [XL330]
        assert c.read_velocity_limit(3) == [445]
        assert c.read_current_limit(3) == [1750]
        c.write_velocity_limit(3, 2047)  # 0 ~ 2,047 on the XL330 page
        assert c.read_velocity_limit(3) == [2047]
        assert c.read_backup_ready(3) == [0]
    finally:
        c.close()


def test_rustypot_protocol_1():
    with running_virtual_bus(P1, protocol=1, return_delay_time=0) as bus:
        ax = rustypot.AxPyController(bus.port, 1_000_000, TIMEOUT)
        try:
            assert ax.ping(1)
            assert ax.read_model_number(1) == [12]
            assert ax.read_max_torque(1) == [1023]
            assert ax.read_raw_ccw_angle_limit(1) == [1023]
            ax.sync_write_raw_goal_position([1], [600])
            assert ax.read_raw_data_with_error(1, 30, 2) == ([88, 2], 0)
            assert ax.write_raw_data_with_error(1, 32, [0xDC, 0x05]) == RANGE_BIT
        finally:
            ax.close()
        mx = rustypot.MxPyController(bus.port, 1_000_000, TIMEOUT)
        try:
            assert mx.read_model_number(2) == [29]
            assert mx.read_model_number(3) == [310]
        finally:
            mx.close()
        assert bus.errors == []


# rustypot's register maps against ours: where they differ, the e-manual page decides,
# and each difference below is one where rustypot departs from it.
RUSTYPOT_DEPARTS = {
    # The XL430-W250 page has no Current Limit(38) or Goal Current(102): no current sensing.
    "XL430-W250": {(38, "missing"), (102, "missing")},
    # The XL330-M288 page has no Acceleration Limit(40); its Indirect Data ends at 227
    # (20 of them, from 208); Firmware Version, Registered Instruction and Hardware Error
    # Status are R on the page, RW in rustypot.
    "XL330-M288": {
        (40, "missing"),
        (228, "missing"),
        (229, "missing"),
        (6, "access"),
        (69, "access"),
        (70, "access"),
    },
    "AX-12A": set(),
    "MX-28": set(),
}


@pytest.mark.parametrize(
    ("controller", "name"),
    [
        (rustypot.Xl430PyController, "XL430-W250"),
        (rustypot.Xl330PyController, "XL330-M288"),
        (rustypot.AxPyController, "AX-12A"),
        (rustypot.MxPyController, "MX-28"),
    ],
)
def test_rustypot_register_maps_agree_with_ours_except_where_they_leave_the_e_manual(
    controller, name
):
    by_address = {r.address: r for r in model(name).registers()}
    differences = set()
    for info in controller.registers():
        ours = by_address.get(info.addr)
        if ours is None:
            differences.add((info.addr, "missing"))
        elif ours.size != info.size:
            differences.add((info.addr, "size"))
        elif (str(info.access).endswith(".Read")) != (ours.access is Access.R):
            differences.add((info.addr, "access"))
    assert differences == RUSTYPOT_DEPARTS[name]
