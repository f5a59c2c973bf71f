"""The virtual bus, Protocol 2.0, driven byte for byte by plain dynamixel-sdk."""

import time

import pytest
from dynamixel_sdk import (
    COMM_RX_TIMEOUT,
    COMM_SUCCESS,
    GroupBulkRead,
    GroupBulkWrite,
    GroupSyncRead,
    GroupSyncWrite,
)

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.protocol import (
    ALERT_BIT,
    Instruction,
    InstructionPacket,
    StatusErrorCode,
    decode_all,
    encode_instruction,
)
from hilbot.hal.dynamixel.protocol import PacketKind as Kind
from hilbot.hal.dynamixel.tables import RegisterName as N

# X-series addresses (https://emanual.robotis.com/docs/en/dxl/x/xm430-w350/)
OPERATING_MODE, MAX_POSITION_LIMIT, TORQUE_ENABLE = 11, 48, 64
STATUS_RETURN_LEVEL, HARDWARE_ERROR, GOAL_POSITION = 68, 70, 116
PRESENT_CURRENT, PRESENT_POSITION, RETURN_DELAY = 126, 132, 9


def settle(seconds: float = 0.6) -> None:
    time.sleep(seconds)


def test_ping_reports_model_number_and_a_missing_id_times_out(p2):
    model, result, error = p2.packet.ping(p2.port, 1)
    assert (model, result, error) == (1020, COMM_SUCCESS, 0)
    assert p2.packet.ping(p2.port, 3)[0] == 1060  # XL430-W250
    assert p2.packet.ping(p2.port, 9)[1] == COMM_RX_TIMEOUT


def test_broadcast_ping_finds_every_servo(p2):
    found, result = p2.packet.broadcastPing(p2.port)
    assert result == COMM_SUCCESS
    assert {k: v[0] for k, v in found.items()} == {1: 1020, 2: 1020, 3: 1060}


def test_write_goal_and_read_it_back_as_the_servo_moves(p2):
    pk, port = p2.packet, p2.port
    assert pk.read4ByteTxRx(port, 1, PRESENT_POSITION) == (2048, COMM_SUCCESS, 0)
    assert pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1) == (COMM_SUCCESS, 0)
    assert pk.write4ByteTxRx(port, 1, GOAL_POSITION, 2500) == (COMM_SUCCESS, 0)
    settle()
    position, result, _ = pk.read4ByteTxRx(port, 1, PRESENT_POSITION)
    assert result == COMM_SUCCESS and abs(position - 2500) <= 1
    assert pk.read4ByteTxRx(port, 2, PRESENT_POSITION)[0] == 2048  # the others stay


def test_eeprom_is_locked_while_torque_is_on(p2):
    pk, port = p2.packet, p2.port
    assert pk.write1ByteTxRx(port, 1, OPERATING_MODE, 4) == (COMM_SUCCESS, 0)
    pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1)
    result, error = pk.write1ByteTxRx(port, 1, OPERATING_MODE, 3)
    assert (result, error) == (COMM_SUCCESS, StatusErrorCode.ACCESS_ERROR)
    assert pk.read1ByteTxRx(port, 1, OPERATING_MODE)[0] == 4  # unchanged


@pytest.mark.parametrize(
    ("address", "size", "value", "code"),
    [
        (TORQUE_ENABLE, 1, 2, StatusErrorCode.DATA_RANGE_ERROR),
        (PRESENT_POSITION, 4, 0, StatusErrorCode.ACCESS_ERROR),  # read-only
        (GOAL_POSITION + 1, 2, 0, StatusErrorCode.DATA_LENGTH_ERROR),  # half a register
        (MAX_POSITION_LIMIT, 4, 5000, StatusErrorCode.DATA_RANGE_ERROR),
    ],
    ids=["out-of-range", "read-only", "partial-register", "eeprom-range"],
)
def test_refused_writes_report_the_error_and_change_nothing(p2, address, size, value, code):
    write = {1: p2.packet.write1ByteTxRx, 2: p2.packet.write2ByteTxRx, 4: p2.packet.write4ByteTxRx}
    memory = p2.bus.servo(2).memory
    p2.bus.register(2, N.ID)  # refresh the present values first
    before = memory.read(address, size)
    result, error = write[size](p2.port, 2, address, value)
    assert (result, error) == (COMM_SUCCESS, code)
    assert memory.read(address, size) == before


def test_a_goal_beyond_the_position_limits_is_refused_with_the_data_limit_error(p2):
    # e-manual: Goal Position(116) ranges over Min ~ Max Position Limit in Position
    # Control Mode; the firmware refuses the write (Data Limit Error) and keeps the goal.
    pk, port = p2.packet, p2.port
    assert pk.write4ByteTxRx(port, 1, MAX_POSITION_LIMIT, 3000) == (COMM_SUCCESS, 0)
    pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1)
    before = pk.read4ByteTxRx(port, 1, GOAL_POSITION)[0]
    assert pk.write4ByteTxRx(port, 1, GOAL_POSITION, 3500) == (COMM_SUCCESS, 6)
    assert pk.read4ByteTxRx(port, 1, GOAL_POSITION)[0] == before
    assert pk.write4ByteTxRx(port, 1, GOAL_POSITION, 3000) == (COMM_SUCCESS, 0)
    settle(1.0)
    assert abs(pk.read4ByteTxRx(port, 1, PRESENT_POSITION)[0] - 3000) <= 1


def test_current_and_load_registers_follow_the_model(p2):
    p2.bus.set_load(1, 1.0)
    p2.bus.set_load(3, 0.5)
    for servo_id in (1, 3):
        p2.packet.write1ByteTxRx(p2.port, servo_id, TORQUE_ENABLE, 1)
    settle(0.3)
    current, result, _ = p2.packet.read2ByteTxRx(p2.port, 1, PRESENT_CURRENT)
    assert result == COMM_SUCCESS
    load, result, _ = p2.packet.read2ByteTxRx(p2.port, 3, PRESENT_CURRENT)  # Present Load here
    assert result == COMM_SUCCESS
    signed = lambda raw: raw - 0x10000 if raw & 0x8000 else raw  # noqa: E731
    assert signed(current) * 0.00269 == pytest.approx(-1.0 / 4.1 * 2.3, rel=0.1)  # [A]
    assert signed(load) * 0.1 == pytest.approx(-0.5 / 1.5 * 100, rel=0.1)  # [%]


def test_sync_write_then_sync_read(p2):
    pk, port = p2.packet, p2.port
    for servo_id in (1, 2, 3):
        pk.write1ByteTxRx(port, servo_id, TORQUE_ENABLE, 1)
    writer = GroupSyncWrite(port, pk, GOAL_POSITION, 4)
    for servo_id, goal in ((1, 1000), (2, 2000), (3, 3000)):
        writer.addParam(servo_id, goal.to_bytes(4, "little"))
    assert writer.txPacket() == COMM_SUCCESS
    settle(1.0)
    reader = GroupSyncRead(port, pk, PRESENT_POSITION, 4)
    for servo_id in (1, 2, 3):
        reader.addParam(servo_id)
    assert reader.txRxPacket() == COMM_SUCCESS
    got = [reader.getData(i, PRESENT_POSITION, 4) for i in (1, 2, 3)]
    assert all(abs(g - w) <= 1 for g, w in zip(got, (1000, 2000, 3000), strict=True))
    assert reader.fastSyncRead() == COMM_SUCCESS
    assert [reader.getData(i, PRESENT_POSITION, 4) for i in (1, 2, 3)] == got


def test_bulk_read_and_fast_bulk_read_of_different_registers(p2):
    pk, port = p2.packet, p2.port
    writer = GroupBulkWrite(port, pk)
    writer.addParam(1, RETURN_DELAY, 1, [5])
    writer.addParam(3, STATUS_RETURN_LEVEL, 1, [2])
    assert writer.txPacket() == COMM_SUCCESS
    reader = GroupBulkRead(port, pk)
    reader.addParam(1, RETURN_DELAY, 1)
    reader.addParam(3, 0, 2)  # model number
    for read in (reader.txRxPacket, reader.fastBulkRead):
        assert read() == COMM_SUCCESS
        assert reader.getData(1, RETURN_DELAY, 1) == 5
        assert reader.getData(3, 0, 2) == 1060


def test_reg_write_waits_for_action(p2):
    pk, port = p2.packet, p2.port
    assert pk.regWriteTxRx(port, 2, RETURN_DELAY, 1, [7]) == (COMM_SUCCESS, 0)
    assert pk.read1ByteTxRx(port, 2, RETURN_DELAY)[0] == 0
    assert pk.read1ByteTxRx(port, 2, 69)[0] == 1  # Registered Instruction
    assert pk.action(port, 254) == COMM_SUCCESS
    assert pk.read1ByteTxRx(port, 2, RETURN_DELAY)[0] == 7


def test_status_return_level_one_answers_reads_only(p2):
    pk, port = p2.packet, p2.port
    assert pk.write1ByteTxRx(port, 2, STATUS_RETURN_LEVEL, 1) == (COMM_SUCCESS, 0)
    assert pk.write1ByteTxRx(port, 2, RETURN_DELAY, 3)[0] == COMM_RX_TIMEOUT  # no status
    assert pk.read1ByteTxRx(port, 2, RETURN_DELAY) == (3, COMM_SUCCESS, 0)  # but it wrote


def test_id_change_and_factory_reset(p2):
    pk, port = p2.packet, p2.port
    assert pk.write1ByteTxRx(port, 3, 7, 9) == (COMM_SUCCESS, 0)  # ID := 9
    assert pk.ping(port, 9)[1] == COMM_SUCCESS
    assert pk.ping(port, 3)[1] == COMM_RX_TIMEOUT
    pk.write1ByteTxRx(port, 9, RETURN_DELAY, 0)
    assert pk.factoryReset(port, 9, 0x02) == (COMM_SUCCESS, 0)  # all but ID and baud
    assert pk.read1ByteTxRx(port, 9, RETURN_DELAY)[0] == 250


def test_a_new_baud_rate_takes_effect_after_the_reply(p2):
    pk, port = p2.packet, p2.port
    assert pk.write1ByteTxRx(port, 2, 8, 1) == (COMM_SUCCESS, 0)  # Baud Rate := 57600
    assert pk.ping(port, 2)[1] == COMM_RX_TIMEOUT
    assert port.setBaudRate(57600)
    assert pk.ping(port, 2)[1] == COMM_SUCCESS
    assert pk.ping(port, 1)[1] == COMM_RX_TIMEOUT


def test_hardware_error_sets_the_alert_bit_until_reboot(p2):
    pk, port = p2.packet, p2.port
    pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1)
    p2.bus.faults(1).hardware_error = HardwareErrorFlags.OVERLOAD
    value, result, error = pk.read1ByteTxRx(port, 1, HARDWARE_ERROR)
    assert (value, result) == (HardwareErrorFlags.OVERLOAD, COMM_SUCCESS)
    assert error & ALERT_BIT
    assert pk.read1ByteTxRx(port, 1, TORQUE_ENABLE)[0] == 0  # shut down
    assert pk.ping(port, 1)[2] & ALERT_BIT  # every status packet carries it
    assert pk.reboot(port, 1) == (COMM_SUCCESS, ALERT_BIT)
    assert pk.read1ByteTxRx(port, 1, HARDWARE_ERROR) == (0, COMM_SUCCESS, 0)


def test_a_corrupt_instruction_is_answered_with_a_crc_error(p2):
    raw = bytearray(
        encode_instruction(InstructionPacket(2, 1, Instruction.READ, b"\x84\x00\x04\x00"))
    )
    raw[-1] ^= 0x55
    p2.port.clearPort()
    p2.port.writePort(raw)
    # the reply, however late a busy host serves the bus; then a moment for any other
    received, deadline = b"", time.monotonic() + 2.0
    while not decode_all(2, Kind.STATUS, received) and time.monotonic() < deadline:
        received += bytes(p2.port.readPort(100))
        time.sleep(0.001)
    time.sleep(0.05)
    replies = decode_all(2, Kind.STATUS, received + bytes(p2.port.readPort(100)))
    assert len(replies) == 1
    assert replies[0].id == 1 and replies[0].error == StatusErrorCode.CRC_ERROR


def test_register_helpers(p2):
    assert p2.bus.register(3, N.MODEL_NUMBER) == 1060
    assert p2.bus.servo(3).spec.name == "XL430-W250"
    with pytest.raises(KeyError, match="ids"):
        p2.bus.servo(42)
