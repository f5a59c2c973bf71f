"""The virtual Feetech firmware: memory rules, Lock, goal clamping, status, faults.

Drives the instruction handler of a Feetech bus with encoded packets (no pty): what goes in is
what the host would send, what comes out is decoded with the HAL codec.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.feetech import protocol as p
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.hal.feetech.tables import model
from hilbot.sim.virtual_bus import FeetechVirtualBus


class Host:
    """Sends instruction packets to a (not started) bus's handler, decodes the replies."""

    def __init__(self, servos: Sequence[tuple[int, str]]) -> None:
        self.clock = 100.0
        self.bus = FeetechVirtualBus(servos, clock=lambda: self.clock, wire_timing=False)

    def exchange(self, packet: p.InstructionPacket | bytes) -> list[p.Decoded]:
        data = packet if isinstance(packet, bytes) else p.encode_instruction(packet)
        (item,) = p.PacketDecoder(p.PacketKind.INSTRUCTION).feed(data)
        assert not isinstance(item, p.StatusPacket)
        with self.bus.lock:
            replies = self.bus.handler.handle(item, self.bus._advance())
        return p.PacketDecoder(p.PacketKind.STATUS).feed(b"".join(r.data for r in replies))

    def send(self, packet: p.InstructionPacket | bytes) -> list[p.StatusPacket]:
        out = self.exchange(packet)
        assert all(isinstance(x, p.StatusPacket) for x in out), out
        return out  # type: ignore[return-value]

    def read(self, servo_id: int, name: N) -> int:
        reg = self.bus.servo(servo_id).spec.table[name]
        (reply,) = self.send(p.read(servo_id, reg.address, reg.size))
        return reg.decode(reply.params)

    def write(self, servo_id: int, name: N, value: int) -> list[p.StatusPacket]:
        reg = self.bus.servo(servo_id).spec.table[name]
        return self.send(p.write(servo_id, reg.address, reg.encode(value)))

    def wait(self, seconds: float) -> None:
        self.clock += seconds


@pytest.fixture
def host() -> Host:
    return Host([(1, "STS3215"), (2, "STS3215")])


def test_power_up_values_are_the_tables(host: Host) -> None:
    spec = model("STS3215")
    for name in (N.MODEL_NUMBER, N.MAX_TORQUE, N.MAX_ANGLE_LIMIT, N.PROTECTION_CURRENT, N.PHASE):
        assert host.read(1, name) == spec.table[name].default
    assert host.read(1, N.TORQUE_LIMIT) == host.read(1, N.MAX_TORQUE)  # loaded at power-up
    assert host.read(1, N.PRESENT_POSITION) == 2048
    assert host.read(1, N.GOAL_POSITION) == 2048  # goal = present at power-up
    assert host.read(1, N.PRESENT_VOLTAGE) == 74


def test_goal_beyond_the_angle_limits_is_clamped_not_refused(host: Host) -> None:
    host.write(1, N.MIN_ANGLE_LIMIT, 1000)
    host.write(1, N.MAX_ANGLE_LIMIT, 3000)
    host.write(1, N.TORQUE_ENABLE, 1)
    (reply,) = host.write(1, N.GOAL_POSITION, 3900)
    assert reply.error == 0
    assert host.read(1, N.GOAL_POSITION) == 3000
    host.wait(2.0)
    assert abs(host.read(1, N.PRESENT_POSITION) - 3000) <= 2
    host.write(1, N.GOAL_POSITION, -200)  # sign-magnitude bit 15
    assert host.read(1, N.GOAL_POSITION) == 1000


def test_multi_turn_limits_do_not_clamp(host: Host) -> None:
    host.write(1, N.MIN_ANGLE_LIMIT, 0)
    host.write(1, N.MAX_ANGLE_LIMIT, 0)
    host.write(1, N.GOAL_POSITION, 5000)
    assert host.read(1, N.GOAL_POSITION) == 5000


def test_lock_1_keeps_eeprom_writes_until_power_off(host: Host) -> None:
    host.write(1, N.LOCK, 1)
    assert host.write(1, N.MAX_TEMPERATURE_LIMIT, 60)[0].error == 0
    assert host.read(1, N.MAX_TEMPERATURE_LIMIT) == 60  # in effect now
    host.bus.faults(1).unplug()
    host.bus.faults(1).replug()
    assert host.read(1, N.MAX_TEMPERATURE_LIMIT) == 70  # not saved
    assert host.read(1, N.LOCK) == 0


def test_lock_0_saves_eeprom_writes(host: Host) -> None:
    host.write(1, N.LOCK, 0)
    host.write(1, N.ID, 7)
    assert host.send(p.ping(1)) == []
    assert host.send(p.ping(7)) == [p.StatusPacket(7, 0)]
    host.bus.faults(7).unplug()
    host.bus.faults(7).replug()
    assert host.send(p.ping(7)) == [p.StatusPacket(7, 0)]


def test_read_only_and_out_of_range_writes_change_nothing(host: Host) -> None:
    host.write(1, N.PRESENT_POSITION, 100)
    assert host.read(1, N.PRESENT_POSITION) == 2048
    host.write(1, N.ID, 254)  # ID range 0 ~ 253
    assert host.read(1, N.ID) == 1
    host.write(1, N.MAX_TORQUE, 1001)
    assert host.read(1, N.MAX_TORQUE) == 1000


def test_homing_offset_shifts_present_position(host: Host) -> None:
    host.write(1, N.HOMING_OFFSET, -100)  # bit 11 sign
    assert host.read(1, N.PRESENT_POSITION) == 2148
    host.write(1, N.HOMING_OFFSET, 48)
    assert host.read(1, N.PRESENT_POSITION) == 2000


def test_torque_128_makes_present_read_2048(host: Host) -> None:
    host.write(1, N.TORQUE_ENABLE, 1)
    host.write(1, N.GOAL_POSITION, 2500)
    host.wait(2.0)
    host.write(1, N.TORQUE_ENABLE, 128)
    assert host.read(1, N.PRESENT_POSITION) == 2048
    assert abs(host.read(1, N.HOMING_OFFSET) - 452) <= 2
    assert host.read(1, N.TORQUE_ENABLE) == 1


def test_status_byte_reports_the_series_bits() -> None:
    host = Host([(1, "STS3215"), (2, "SCS0009")])
    host.bus.raise_hardware_error(1, HardwareErrorFlags.OVERLOAD | HardwareErrorFlags.MOTOR_ENCODER)
    host.bus.raise_hardware_error(
        2, HardwareErrorFlags.MOTOR_ENCODER | HardwareErrorFlags.OVERHEATING
    )
    assert host.send(p.ping(1))[0].flags == p.StatusError.OVERLOAD | p.StatusError.ANGLE_SENSOR
    assert host.read(1, N.STATUS) == 0x22
    assert host.send(p.ping(2))[0].flags == p.StatusError.OVERHEAT  # SCS: no angle sensor bit
    host.send(p.reboot(1))
    assert host.send(p.ping(1))[0].error == 0


def test_response_status_level_0_answers_only_ping_and_read(host: Host) -> None:
    host.write(1, N.RESPONSE_STATUS_LEVEL, 0)
    assert host.write(1, N.GOAL_SPEED, 100) == []
    assert host.read(1, N.GOAL_SPEED) == 100
    assert len(host.send(p.ping(1))) == 1


def test_broadcast_ping_answers_in_id_order_and_broadcast_write_is_silent(host: Host) -> None:
    assert [r.id for r in host.send(p.ping(p.BROADCAST_ID))] == [1, 2]
    assert host.send(p.write(p.BROADCAST_ID, 41, b"\x05")) == []
    assert host.read(2, N.ACCELERATION) == 5


def test_bad_checksum_is_ignored(host: Host) -> None:
    frame = bytearray(p.encode_instruction(p.ping(1)))
    frame[-1] ^= 0xFF
    assert host.send(bytes(frame)) == []
    assert host.bus.handler.corrupt == 1


def test_reg_write_waits_for_action(host: Host) -> None:
    host.send(p.reg_write(1, 46, (300).to_bytes(2, "little")))
    assert host.read(1, N.ASYNC_WRITE_FLAG) == 1
    assert host.read(1, N.GOAL_SPEED) == 0
    assert host.send(p.action()) == []
    assert host.read(1, N.GOAL_SPEED) == 300
    assert host.read(1, N.ASYNC_WRITE_FLAG) == 0


def test_sync_read_and_write(host: Host) -> None:
    host.send(
        p.sync_write(46, 2, [(1, (10).to_bytes(2, "little")), (2, (20).to_bytes(2, "little"))])
    )
    replies = host.send(p.sync_read(46, 2, [2, 1, 9]))
    assert [(r.id, int.from_bytes(r.params, "little")) for r in replies] == [(2, 20), (1, 10)]


def test_scs0009_is_big_endian_and_has_no_sync_read() -> None:
    host = Host([(1, "SCS0009")])
    (reply,) = host.send(p.read(1, 3, 2))
    assert reply.params == b"\x05\x04"  # model number 1284, high byte first
    host.send(p.write(1, 42, (600).to_bytes(2, "big")))
    assert host.read(1, N.GOAL_POSITION) == 600
    assert host.send(p.sync_read(56, 2, [1])) == []


def test_injected_faults(host: Host) -> None:
    host.bus.faults(1).drop_rate = 1.0
    assert host.send(p.ping(1)) == []
    host.bus.faults(1).clear()
    host.bus.faults(1).corrupt_rate = 1.0
    (bad,) = host.exchange(p.ping(1))
    assert isinstance(bad, p.DecodeError)  # the reply fails its checksum
    host.bus.faults(1).clear()
    host.bus.faults(2).brown_out()
    assert host.send(p.ping(2)) == []
    host.send(p.reboot(2))  # a reboot reaches a hung servo and revives it
    assert host.send(p.ping(2)) == [p.StatusPacket(2, 0)]
    host.bus.faults(2).unplug()
    assert host.send(p.read(2, 56, 2)) == []
    assert host.send(p.reboot(2)) == []  # unplugged: nothing hears it


def test_truncated_and_delayed_replies(host: Host) -> None:
    faults = host.bus.faults(1)
    faults.truncate_rate = 1.0
    faults.truncate_keep = 1
    (short,) = host.send(p.read(1, 56, 2))
    assert short.params == b"\x00"  # one byte of two, with a valid checksum
    faults.clear()
    faults.delay = 0.004
    with host.bus.lock:
        (reply,) = host.bus.handler.handle(p.ping(1), host.bus._advance())
    assert reply.delay == pytest.approx(0.004)


def test_return_delay_time_delays_the_reply(host: Host) -> None:
    host.write(2, N.RETURN_DELAY_TIME, 250)  # 2 µs units
    with host.bus.lock:
        (reply,) = host.bus.handler.handle(p.ping(2), host.bus._advance())
    assert reply.delay == pytest.approx(500e-6)


def test_factory_reset_keeps_the_id(host: Host) -> None:
    host.write(1, N.ID, 9)
    host.write(9, N.MAX_TORQUE, 500)
    assert host.send(p.factory_reset(9)) == [p.StatusPacket(9, 0)]
    assert host.read(9, N.MAX_TORQUE) == 1000


def test_the_manuals_write_reg_write_and_action_packets(host: Host) -> None:
    # Protocol manual 1.3.3 ~ 1.3.5: position 2048, time 0, speed 1000 at 0x2A.
    write = bytes.fromhex("FF FF 01 09 03 2A 00 08 00 00 E8 03 D5")
    assert host.send(write) == [p.StatusPacket(1, 0)]  # "FF FF 01 02 00 FC"
    assert (host.read(1, N.GOAL_POSITION), host.read(1, N.GOAL_SPEED)) == (2048, 1000)
    host.write(1, N.GOAL_SPEED, 0)
    reg_write = bytes.fromhex("FF FF 01 09 04 2A 00 08 00 00 E8 03 D4")
    assert host.send(reg_write) == [p.StatusPacket(1, 0)]
    assert host.read(1, N.GOAL_SPEED) == 0
    assert host.send(bytes.fromhex("FF FF FE 02 05 FA")) == []  # broadcast ACTION: no reply
    assert host.read(1, N.GOAL_SPEED) == 1000
