"""Clients we did not write drive the virtual Feetech bus on its pty.

The vendor SDK (feetech-servo-sdk, ``scservo_sdk``: the calls its example programs
make, as LeRobot uses them) and rustypot's STS3215 and SCS0009 controllers ping,
read, write, sync read and sync write, and read the memory tables' documented
values.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import rustypot
import scservo_sdk as scs
from scservo_sdk import port_handler

from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.sim.virtual_bus import FeetechVirtualBus, running_feetech_bus

#: rustypot's read timeout [s]: only a failing test waits it out, so it is generous.
TIMEOUT = 1.0
IDS = (1, 2, 3)


@pytest.fixture(autouse=True)
def _patient_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply timeout of about a second for the stock SDK (``2 * LATENCY_TIMER + 2`` ms).

    Its default, 16 ms, is the USB adapter's latency timer, which a pty does not have;
    on a loaded machine the server thread may be scheduled later than that. No test
    here expects a timeout, so only a failure waits it out.
    """
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 500)


@pytest.fixture
def bus() -> Iterator[FeetechVirtualBus]:
    with running_feetech_bus([(i, "STS3215") for i in IDS]) as bus:
        yield bus


def _sdk(port: str, end: int) -> tuple[scs.PortHandler, object]:
    handler = scs.PortHandler(port)
    assert handler.openPort()
    assert handler.setBaudRate(1_000_000)
    return handler, scs.PacketHandler(end)


def _until(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# ---------------------------------------------------------------- vendor SDK


def test_sdk_ping_reads_the_model_number(bus: FeetechVirtualBus) -> None:
    port, ph = _sdk(bus.port, 0)
    try:
        assert ph.ping(port, 2) == (777, scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        number, result, _ = ph.ping(port, 9)  # type: ignore[attr-defined]
        assert (number, result) == (0, scs.COMM_RX_TIMEOUT)
    finally:
        port.closePort()


def test_sdk_reads_the_documented_defaults(bus: FeetechVirtualBus) -> None:
    port, ph = _sdk(bus.port, 0)
    try:
        documented = {  # STS memory table, STS3215 column
            (0, 1): 3,  # firmware major version
            (1, 1): 6,  # firmware minor version
            (13, 1): 70,  # max temperature limit
            (16, 2): 1000,  # max torque
            (11, 2): 4095,  # max angle limit
            (28, 2): 500,  # protection current
            (48, 2): 1000,  # torque limit := max torque at power-up
        }
        for (address, size), value in documented.items():
            read = ph.read1ByteTxRx if size == 1 else ph.read2ByteTxRx  # type: ignore[attr-defined]
            assert read(port, 1, address) == (value, scs.COMM_SUCCESS, 0), address
    finally:
        port.closePort()


def test_sdk_write_moves_the_servo_and_sync_reads_it(bus: FeetechVirtualBus) -> None:
    port, ph = _sdk(bus.port, 0)
    try:
        # Servo 1 moves down at 200 steps/s: its Present Speed reads negative on the way.
        assert ph.write2ByteTxRx(port, 1, 46, 200) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        group_write = scs.GroupSyncWrite(port, ph, 42, 2)
        for servo_id in IDS:
            assert ph.write1ByteTxRx(port, servo_id, 40, 1) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
            goal = 1000 + 500 * servo_id
            assert group_write.addParam(servo_id, [scs.SCS_LOBYTE(goal), scs.SCS_HIBYTE(goal)])
        assert group_write.txPacket() == scs.COMM_SUCCESS
        group_read = scs.GroupSyncRead(port, ph, 56, 4)
        for servo_id in IDS:
            assert group_read.addParam(servo_id)

        assert group_read.txRxPacket() == scs.COMM_SUCCESS
        assert -210 <= scs.SCS_TOHOST(group_read.getData(1, 58, 2), 15) < 0

        def arrived() -> bool:
            assert group_read.txRxPacket() == scs.COMM_SUCCESS
            positions = [group_read.getData(i, 56, 2) for i in IDS]
            return all(abs(p - (1000 + 500 * i)) <= 2 for p, i in zip(positions, IDS, strict=True))

        _until(arrived)
    finally:
        port.closePort()


def test_sdk_negative_goal_speed_round_trips_in_sign_magnitude(bus: FeetechVirtualBus) -> None:
    port, ph = _sdk(bus.port, 0)
    try:
        raw = scs.SCS_TOSCS(-300, 15)
        assert ph.write2ByteTxRx(port, 3, 46, raw) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        value, result, _ = ph.read2ByteTxRx(port, 3, 46)  # type: ignore[attr-defined]
        assert (scs.SCS_TOHOST(value, 15), result) == (-300, scs.COMM_SUCCESS)
        assert bus.register(3, N.GOAL_SPEED) == -300
    finally:
        port.closePort()


def test_sdk_reports_the_status_bits(bus: FeetechVirtualBus) -> None:
    from hilbot.hal.backend import HardwareErrorFlags

    bus.raise_hardware_error(2, HardwareErrorFlags.OVERHEATING)
    port, ph = _sdk(bus.port, 0)
    try:
        _, result, error = ph.read1ByteTxRx(port, 2, 65)  # type: ignore[attr-defined]
        assert (result, error) == (scs.COMM_SUCCESS, 4)
        assert ph.getRxPacketError(error) == "[RxPacketError] Overheat error!"  # type: ignore[attr-defined]
    finally:
        port.closePort()


def test_sdk_scs_end_reads_scs0009_big_endian() -> None:
    with running_feetech_bus([(4, "SCS0009")]) as bus:
        port, ph = _sdk(bus.port, 1)  # protocol_end 1: SCS word order
        try:
            assert ph.ping(port, 4) == (1284, scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
            assert ph.write2ByteTxRx(port, 4, 42, 700) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
            assert ph.read2ByteTxRx(port, 4, 42) == (700, scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
            assert bus.register(4, N.GOAL_POSITION) == 700
        finally:
            port.closePort()
            scs.SCS_SETEND(0)  # the SDK keeps the word order in a module global


# ---------------------------------------------------------------- rustypot


def test_rustypot_sts3215(bus: FeetechVirtualBus) -> None:
    c = rustypot.Sts3215PyController(bus.port, 1_000_000, TIMEOUT)
    try:
        assert c.ping(1)
        assert c.read_register(1, "model_number") == 777
        assert c.read_register(2, "max_torque_limit") == 1000
        assert c.read_register(3, "protection_current") == 500
        c.write_register(2, "homing_offset", -100)
        assert bus.register(2, N.HOMING_OFFSET) == -100
        assert c.read_register(2, "homing_offset") == -100
        assert c.sync_read_raw_present_position(list(IDS)) == [2048, 2148, 2048]
        c.sync_write_raw_torque_enable(list(IDS), [1, 1, 1])
        c.sync_write_raw_goal_position(list(IDS), [1500, 2500, 3500])

        def arrived() -> bool:
            got = c.sync_read_raw_present_position(list(IDS))
            return all(abs(a - b) <= 2 for a, b in zip(got, [1500, 2500, 3500], strict=True))

        _until(arrived)
    finally:
        c.close()


def test_rustypot_scs0009_word_order() -> None:
    with running_feetech_bus([(1, "SCS0009")]) as bus:
        c = rustypot.Scs0009PyController(bus.port, 1_000_000, TIMEOUT)
        try:
            assert c.read_register(1, "model_number") == 1284
            assert c.read_register(1, "max_angle_limit") == 1003
            c.write_register(1, "goal_time", 300)
            assert bus.register(1, N.GOAL_TIME) == 300
        finally:
            c.close()
