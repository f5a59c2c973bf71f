"""The virtual Feetech bus on its pty: the protocol manual's exchanges byte for byte,
wire timing at the host's bit rate, and its configuration errors."""

from __future__ import annotations

import time

import pytest
import serial

from hilbot.hal.errors import ConfigError
from hilbot.hal.feetech import protocol as p
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.virtual_bus import running_feetech_bus


def _exchange(link: serial.Serial, request: bytes, reply_size: int) -> bytes:
    link.reset_input_buffer()
    link.write(request)
    return bytes(link.read(reply_size))


def test_the_manuals_exchanges_byte_for_byte() -> None:
    # Protocol manual 1.3.1, 1.3.2 and 1.3.7: the servos are where its replies say.
    with running_feetech_bus(
        {1: "STS3215-12V", 2: "STS3215-12V"}, initial_positions={1: 1304}
    ) as bus:
        with serial.Serial(bus.port, 1_000_000, timeout=2.0) as link:
            ping = _exchange(link, bytes.fromhex("FF FF 01 02 01 FB"), 6)
            assert ping == bytes.fromhex("FF FF 01 02 00 FC")
            read = _exchange(link, bytes.fromhex("FF FF 01 04 02 38 02 BE"), 8)
            assert read == bytes.fromhex("FF FF 01 04 00 18 05 DD")
        with bus.lock:
            bus.model.position[:] = [0.0, -bus.servo(2).spec.radians_per_tick]  # 2048, 2047
            bus.model.goal[:] = bus.model.reference[:] = bus.model.position
            bus.model.voltage[:] = [12.1, 11.9]
            bus.model.temperature = [30.0, 35.0]
            bus.model.invalidate()
        with serial.Serial(bus.port, 1_000_000, timeout=2.0) as link:
            replies = _exchange(link, bytes.fromhex("FF FF FE 06 82 38 08 01 02 36"), 28)
        assert replies == bytes.fromhex(
            "FF FF 01 0A 00 00 08 00 00 00 00 79 1E 55 FF FF 02 0A 00 FF 07 00 00 00 00 77 23 53"
        )
        assert bus.errors == []


def test_replies_take_their_wire_time_at_the_hosts_rate() -> None:
    # 115200 bit/s is Baud Rate 4; a sync read of 3 x 8 bytes is 9 + 3 bytes out and
    # 3 x 14 bytes back: 54 bytes of 10 bits, 4.7 ms on a wire. A pty alone takes µs.
    ids = [1, 2, 3]
    with running_feetech_bus([(i, "STS3215") for i in ids], baudrate=115_200) as bus:
        request = p.encode_instruction(p.sync_read(56, 8, ids))
        wire = (len(request) + 3 * 14) * 10 / 115_200
        with serial.Serial(bus.port, 115_200, timeout=2.0) as link:
            for _ in range(3):
                start = time.monotonic()
                data = _exchange(link, request, 42)
                elapsed = time.monotonic() - start
                assert len(data) == 42
                assert elapsed >= wire * 0.99, (elapsed, wire)


def test_a_host_at_another_rate_is_not_heard() -> None:
    with running_feetech_bus([(1, "STS3215")], baudrate=500_000) as bus:
        with serial.Serial(bus.port, 1_000_000, timeout=0.2) as link:
            assert _exchange(link, p.encode_instruction(p.ping(1)), 6) == b""
        # heard as an instruction, unanswered: the count may come late on a busy host
        deadline = time.monotonic() + 10.0
        while bus.handler.instructions < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bus.handler.instructions == 1


def test_runner_takes_joint_positions_from_servo_specs() -> None:
    specs = [ServoSpec(1, "STS3215", "shoulder", offset=0.1, direction=-1)]
    bus = running_feetech_bus(specs, initial_positions={"shoulder": 0.6})
    # ticks = 2048 + direction * (0.6 - 0.1) / (2 pi / 4096)
    assert bus.register(1, N.PRESENT_POSITION) == 2048 - 326
    with pytest.raises(TypeError, match="ServoSpec"):
        running_feetech_bus([(1, "STS3215")], initial_positions={"shoulder": 0.6})


@pytest.mark.parametrize(
    ("servos", "baudrate", "message"),
    [
        ([(1, "STS9999")], 1_000_000, "unknown Feetech model"),
        ([(1, "STS3215")], 9600, "cannot use 9600"),
        ([(1, "STS3215"), (1, "STS3250")], 1_000_000, "appears twice"),
    ],
    ids=["unknown model", "baud rate", "duplicate id"],
)
def test_configuration_errors(servos: list[tuple[int, str]], baudrate: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        running_feetech_bus(servos, baudrate=baudrate)
