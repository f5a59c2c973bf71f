"""Injected faults on the virtual bus, as dynamixel-sdk sees them."""

import time

import pytest
from dynamixel_sdk import COMM_RX_CORRUPT, COMM_RX_TIMEOUT, COMM_SUCCESS, GroupSyncRead

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.protocol import ALERT_BIT
from hilbot.sim.faults import Presence

PRESENT_POSITION, TORQUE_ENABLE, GOAL_POSITION = 132, 64, 116


def sync_read(sdk, ids=(1, 2, 3), fast=False) -> int:
    reader = GroupSyncRead(sdk.port, sdk.packet, PRESENT_POSITION, 4)
    for servo_id in ids:
        reader.addParam(servo_id)
    return reader.fastSyncRead() if fast else reader.txRxPacket()


def test_every_reply_dropped_is_a_timeout(p2):
    p2.bus.faults(2).drop_rate = 1.0
    assert p2.packet.ping(p2.port, 2)[1] == COMM_RX_TIMEOUT
    assert sync_read(p2) == COMM_RX_TIMEOUT
    assert sync_read(p2, fast=True) in (COMM_RX_TIMEOUT, COMM_RX_CORRUPT)  # cut-short reply
    p2.bus.faults(2).drop_rate = 0.0
    p2.port.clearPort()
    assert p2.packet.ping(p2.port, 2)[1] == COMM_SUCCESS


def test_a_drop_rate_loses_a_seeded_fraction(p2):
    p2.bus.faults(1).drop_rate = 0.5
    results = [p2.packet.ping(p2.port, 1)[1] for _ in range(16)]
    lost = results.count(COMM_RX_TIMEOUT)
    assert 2 <= lost <= 14
    assert set(results) == {COMM_SUCCESS, COMM_RX_TIMEOUT}


def test_a_corrupted_crc_is_reported_as_corrupt(p2):
    p2.bus.faults(3).corrupt_rate = 1.0
    assert p2.packet.read4ByteTxRx(p2.port, 3, PRESENT_POSITION)[1] == COMM_RX_CORRUPT
    assert sync_read(p2, fast=True) == COMM_RX_CORRUPT


def test_added_delay_postpones_the_reply(p2):
    p2.bus.faults(1).delay = 0.02
    start = time.perf_counter()
    assert p2.packet.ping(p2.port, 1)[1] == COMM_SUCCESS
    assert time.perf_counter() - start >= 0.02


def test_unplug_and_replug_powers_up_with_torque_off(p2):
    pk, port = p2.packet, p2.port
    pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1)
    p2.bus.faults(1).unplug()
    assert pk.ping(port, 1)[1] == COMM_RX_TIMEOUT
    assert pk.reboot(port, 1)[0] == COMM_RX_TIMEOUT  # an unplugged servo hears nothing
    assert p2.bus.faults(1).presence is Presence.UNPLUGGED
    p2.bus.faults(1).replug()
    assert pk.ping(port, 1)[1] == COMM_SUCCESS
    assert pk.read1ByteTxRx(port, 1, TORQUE_ENABLE)[0] == 0


def test_a_browned_out_servo_comes_back_after_a_reboot(p2):
    pk, port = p2.packet, p2.port
    pk.write1ByteTxRx(port, 2, TORQUE_ENABLE, 1)
    p2.bus.faults(2).brown_out()
    assert pk.ping(port, 2)[1] == COMM_RX_TIMEOUT
    assert sync_read(p2) == COMM_RX_TIMEOUT
    assert pk.reboot(port, 2) == (COMM_SUCCESS, 0)
    assert pk.ping(port, 2)[1] == COMM_SUCCESS
    assert pk.read1ByteTxRx(port, 2, TORQUE_ENABLE)[0] == 0


@pytest.mark.parametrize(
    "flags",
    [HardwareErrorFlags.OVERLOAD, HardwareErrorFlags.OVERHEATING],
    ids=["overload", "overheating"],
)
def test_injected_hardware_errors_latch_until_reboot(p2, flags):
    pk, port = p2.packet, p2.port
    p2.bus.faults(3).hardware_error = flags
    for _ in range(2):
        value, result, error = pk.read1ByteTxRx(port, 3, 70)
        assert (value, result) == (flags, COMM_SUCCESS) and error & ALERT_BIT
    assert pk.write1ByteTxRx(port, 3, TORQUE_ENABLE, 1) == (COMM_SUCCESS, ALERT_BIT)
    assert pk.read1ByteTxRx(port, 3, TORQUE_ENABLE)[0] == 0  # shutdown refuses torque
    pk.reboot(port, 3)
    assert pk.read1ByteTxRx(port, 3, 70) == (0, COMM_SUCCESS, 0)


def test_a_real_overload_latches_from_the_dynamics(p2):
    pk, port = p2.packet, p2.port
    p2.bus.set_load(1, 10.0)  # far beyond the XM430-W350's 4.1 N·m
    pk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1)
    time.sleep(1.8)  # overload_time is 1.5 s
    value, result, error = pk.read1ByteTxRx(port, 1, 70)
    assert result == COMM_SUCCESS
    assert value == HardwareErrorFlags.OVERLOAD and error & ALERT_BIT


def test_clearing_faults(p2):
    faults = p2.bus.faults(1)
    faults.drop_rate, faults.delay = 1.0, 0.5
    faults.unplug()
    p2.bus.faults.clear()
    assert faults.answers and faults.drop_rate == 0.0 and faults.delay == 0.0
    with pytest.raises(ValueError, match="drop_rate"):
        faults.drop_rate = 1.5


def test_a_fast_read_cut_short_keeps_valid_slices_before_the_gap(p2):
    # Real firmware: LEN announces the whole reply and each slice's running CRC covers
    # that header, so the slices before a silent servo still verify.
    from hilbot.hal.dynamixel.protocol import (
        Instruction,
        InstructionPacket,
        encode_instruction,
        fast_status_prefix,
    )

    p2.bus.faults(2).drop_rate = 1.0
    params = PRESENT_POSITION.to_bytes(2, "little") + (4).to_bytes(2, "little") + bytes((1, 2, 3))
    p2.port.clearPort()
    p2.port.writePort(
        encode_instruction(InstructionPacket(2, 0xFE, Instruction.FAST_SYNC_READ, params))
    )
    # servo 1's slice, however late a busy host serves the bus; then 0.5 s for any more
    expected = 8 + 1 + 1 + 4 + 2  # header, then servo 1's slice only
    raw, deadline = b"", time.monotonic() + 5.0
    while len(raw) < expected and time.monotonic() < deadline:
        raw += bytes(p2.port.readPort(64))
        time.sleep(0.005)
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        raw += bytes(p2.port.readPort(64))
        time.sleep(0.005)
    assert len(raw) == expected
    assert [part.id for part in fast_status_prefix(raw, [4, 4, 4])] == [1]
