"""The virtual bus, Protocol 1.0 (AX-12A, MX-28, MX-64), driven by plain dynamixel-sdk."""

import time

from dynamixel_sdk import COMM_RX_CORRUPT, COMM_RX_TIMEOUT, COMM_SUCCESS, GroupSyncWrite

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.protocol import (
    Instruction,
    InstructionPacket,
    PacketDecoder,
    Protocol1Error,
    bulk_read_params,
    encode_instruction,
)
from hilbot.hal.dynamixel.protocol import PacketKind as Kind

# AX / MX(1.0) addresses (https://emanual.robotis.com/docs/en/dxl/ax/ax-12a/)
CCW_ANGLE_LIMIT, TORQUE_ENABLE, GOAL_POSITION, PRESENT_POSITION = 8, 24, 30, 36


def test_ping_and_model_numbers(p1):
    pk, port = p1.packet, p1.port
    assert pk.ping(port, 1) == (12, COMM_SUCCESS, 0)  # AX-12A
    assert pk.ping(port, 2)[0] == 29  # MX-28 (1.0)
    assert pk.ping(port, 3)[0] == 310  # MX-64 (1.0)
    assert pk.ping(port, 4)[1] == COMM_RX_TIMEOUT


def test_goal_and_present_position(p1):
    pk, port = p1.packet, p1.port
    assert pk.read2ByteTxRx(port, 1, PRESENT_POSITION) == (512, COMM_SUCCESS, 0)
    pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1)
    assert pk.write2ByteTxRx(port, 1, GOAL_POSITION, 700) == (COMM_SUCCESS, 0)
    time.sleep(0.6)
    position, result, _ = pk.read2ByteTxRx(port, 1, PRESENT_POSITION)
    assert result == COMM_SUCCESS and abs(position - 700) <= 1


def test_out_of_range_write_sets_the_range_bit(p1):
    result, error = p1.packet.write2ByteTxRx(p1.port, 1, GOAL_POSITION, 2000)  # AX: 0..1023
    assert (result, error) == (COMM_SUCCESS, Protocol1Error.RANGE)


def test_goal_outside_the_angle_limits_sets_the_angle_limit_bit(p1):
    pk, port = p1.packet, p1.port
    assert pk.write2ByteTxRx(port, 1, CCW_ANGLE_LIMIT, 600) == (COMM_SUCCESS, 0)
    pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1)
    assert pk.write2ByteTxRx(port, 1, GOAL_POSITION, 900) == (
        COMM_SUCCESS,
        Protocol1Error.ANGLE_LIMIT,
    )
    time.sleep(0.6)
    assert abs(pk.read2ByteTxRx(port, 1, PRESENT_POSITION)[0] - 600) <= 1  # clamped


def exchange(sdk, packet: InstructionPacket | bytes, replies: int) -> list:
    """Send an instruction (or raw bytes); decode status packets until ``replies`` arrived.

    It waits up to 2 s for them (a busy host may serve the bus late), then 0.05 s more
    for any others.
    """
    decoder = PacketDecoder(1, Kind.STATUS)
    sdk.port.clearPort()
    sdk.port.writePort(packet if isinstance(packet, bytes) else encode_instruction(packet))
    out: list = []
    deadline = time.monotonic() + 2.0
    while len(out) < replies and time.monotonic() < deadline:
        out += decoder.feed(bytes(sdk.port.readPort(64)))
        time.sleep(0.001)
    time.sleep(0.05)
    return out + decoder.feed(bytes(sdk.port.readPort(64)))


def test_sync_write_and_bulk_read_on_the_mx_servos(p1):
    pk, port = p1.packet, p1.port
    for servo_id in (2, 3):
        pk.write1ByteTxRx(port, servo_id, TORQUE_ENABLE, 1)
    writer = GroupSyncWrite(port, pk, GOAL_POSITION, 2)
    writer.addParam(2, (1500).to_bytes(2, "little"))
    writer.addParam(3, (2500).to_bytes(2, "little"))
    assert writer.txPacket() == COMM_SUCCESS
    time.sleep(1.0)
    # dynamixel-sdk 4.1's GroupBulkRead cannot build a 1.0 bulk read (bulkReadTx
    # signature mismatch), so the instruction is built with our codec.
    reads = [(2, PRESENT_POSITION, 2), (3, PRESENT_POSITION, 2)]
    bulk = InstructionPacket(1, 0xFE, Instruction.BULK_READ, bulk_read_params(1, reads))
    replies = exchange(p1, bulk, 2)
    assert [r.id for r in replies] == [2, 3]
    got = [int.from_bytes(r.params, "little") for r in replies]
    assert abs(got[0] - 1500) <= 1 and abs(got[1] - 2500) <= 1


def test_the_ax_does_not_answer_bulk_read(p1):
    reads = [(1, PRESENT_POSITION, 2), (2, PRESENT_POSITION, 2)]
    bulk = InstructionPacket(1, 0xFE, Instruction.BULK_READ, bulk_read_params(1, reads))
    assert [r.id for r in exchange(p1, bulk, 2)] == [2]


def test_hardware_errors_are_bits_of_every_status_packet(p1):
    pk, port = p1.packet, p1.port
    p1.bus.faults(2).hardware_error = HardwareErrorFlags.OVERLOAD | HardwareErrorFlags.OVERHEATING
    expected = Protocol1Error.OVERLOAD | Protocol1Error.OVERHEATING
    assert pk.ping(port, 2)[2] == expected
    assert pk.read2ByteTxRx(port, 2, PRESENT_POSITION)[2] == expected
    # Protocol 1.0 defines no Reboot (the SDK offers none): the instruction error bit,
    # and the error stays latched.
    replies = exchange(p1, InstructionPacket(1, 2, Instruction.REBOOT), 1)
    assert [(r.id, r.error) for r in replies] == [(2, expected | Protocol1Error.INSTRUCTION)]
    assert pk.ping(port, 2)[2] == expected
    p1.bus.faults(2).unplug()  # a power cycle clears it
    p1.bus.faults(2).replug()
    assert pk.ping(port, 2)[2] == 0


def test_a_bad_checksum_is_answered_with_the_checksum_bit(p1):
    raw = bytearray(encode_instruction(InstructionPacket(1, 1, Instruction.READ, b"\x24\x02")))
    raw[-1] ^= 0x5A
    replies = exchange(p1, bytes(raw), 1)
    assert [(r.id, r.error) for r in replies] == [(1, Protocol1Error.CHECKSUM)]


def test_dropped_and_corrupted_replies(p1):
    pk, port = p1.packet, p1.port
    p1.bus.faults(1).drop_rate = 1.0
    assert pk.ping(port, 1)[1] == COMM_RX_TIMEOUT
    p1.bus.faults(1).drop_rate = 0.0
    p1.bus.faults(1).corrupt_rate = 1.0
    port.clearPort()
    assert pk.read2ByteTxRx(port, 1, PRESENT_POSITION)[1] == COMM_RX_CORRUPT
    p1.bus.faults.clear()
    port.clearPort()
    assert pk.ping(port, 1)[1] == COMM_SUCCESS
