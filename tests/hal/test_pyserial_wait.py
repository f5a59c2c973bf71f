"""The pyserial wait of both ports (Windows' wait, forced here) against the virtual buses.

``HILBOT_PORT_WAIT=pyserial`` makes the Dynamixel and the Feetech port wait through
pyserial's own timeout instead of ``select`` on the file descriptor, as they do on
Windows. The real backends and buses then run unchanged on the virtual buses' ptys:
ping, read, write, a sync read / sync write cycle, and a missing servo whose timeout
still ends at its deadline (and costs no CPU while it waits).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest
import serial

from hilbot.hal.bus.port import (
    PORT_WAIT_ENV,
    BlockingPortHandler,
    PortWait,
    SerialPort,
    port_wait,
    pyserial_timeout,
)
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.tables import RegisterName as N
from hilbot.hal.dynamixel.timing import ReadMethod
from hilbot.hal.errors import CommTimeout, ConfigError, PortError, ServoError
from hilbot.hal.feetech.backend import FeetechBackend
from hilbot.hal.feetech.bus import FeetechBus
from hilbot.hal.feetech.tables import FeetechRegister as F
from hilbot.hal.feetech.tables import model as feetech_model
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim.virtual_bus import FeetechVirtualBus

#: [ms] the reply slack of the timeout tests: long enough to tell a wait that ends at
#: the deadline from one that returns at once, short enough for a quick test.
MARGIN_MS = 40.0
#: [s] how late past its deadline a timeout may end on this shared, busy machine (a
#: pyserial timeout left at a fixed value, or none, would take far longer).
LATE_S = 0.25


@pytest.fixture(autouse=True)
def pyserial_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_WAIT_ENV, "pyserial")


def timed(call, *args):
    """``(exception raised, wall time [s], CPU time [s] of this process)`` of ``call(*args)``."""
    wall, cpu = time.monotonic(), time.process_time()
    try:
        call(*args)
    except Exception as exc:
        return exc, time.monotonic() - wall, time.process_time() - cpu
    raise AssertionError(f"{call.__name__}{args} did not fail")


def assert_timed_out_at_the_deadline(outcome, deadline: float) -> None:
    exc, wall, cpu = outcome
    assert isinstance(exc, CommTimeout) and exc.servo_id == 9
    assert deadline * 0.9 <= wall < deadline + LATE_S
    assert cpu < 0.5 * wall  # it waited in pyserial's read, not in a loop


# --- which wait -------------------------------------------------------------------------


def test_the_wait_follows_the_platform_and_the_environment():
    assert port_wait({}, "linux") is PortWait.SELECT
    assert port_wait({}, "darwin") is PortWait.SELECT
    assert port_wait({}, "win32") is PortWait.PYSERIAL
    assert port_wait({PORT_WAIT_ENV: "pyserial"}, "linux") is PortWait.PYSERIAL
    assert port_wait({PORT_WAIT_ENV: " Select "}, "darwin") is PortWait.SELECT
    with pytest.raises(ConfigError, match=r"HILBOT_PORT_WAIT='poll': expected one of select"):
        port_wait({PORT_WAIT_ENV: "poll"}, "linux")
    with pytest.raises(ConfigError, match="not available on win32"):
        port_wait({PORT_WAIT_ENV: "select"}, "win32")


def test_a_timeout_is_never_zero_while_time_is_left():
    # Windows counts read timeouts in whole ms, and 0 there means "wait forever"
    assert pyserial_timeout(0.0002) == 0.001
    assert pyserial_timeout(0.0123) == 0.0123
    assert pyserial_timeout(0.0) == 0.0
    assert pyserial_timeout(-1.0) == 0.0


def test_select_stays_the_default_here(monkeypatch):
    monkeypatch.delenv(PORT_WAIT_ENV)
    assert DynamixelBus("unused", 1_000_000).port.wait is PortWait.SELECT
    assert FeetechBus("unused", 1_000_000).port.wait is PortWait.SELECT


def loopback() -> serial.SerialBase:
    """pyserial's ``loop://`` port: what is written comes back, and it has no file descriptor
    (``fileno()`` raises), as a Windows COM port has none: ``select`` cannot wait on it."""
    port = serial.serial_for_url("loop://", timeout=0)
    with pytest.raises(OSError):
        port.fileno()
    return port


def test_the_dynamixel_wait_needs_no_file_descriptor():
    handler = BlockingPortHandler("loop://", latency_ms=0.0, wait=PortWait.PYSERIAL)
    handler.ser, handler.is_open, handler.tx_time_per_byte = loopback(), True, 0.01
    assert handler.writePort(b"\x01\x02\x03") == 3
    handler.set_deadline(0.05)
    assert handler.readPort(2) == b"\x01\x02"
    assert handler.read_available(0.05) == b"\x03"
    start = time.monotonic()
    assert handler.read_available(0.03) == b""
    assert time.monotonic() - start >= 0.029
    handler.writePort(b"\x04")
    handler.clearPort()
    handler.set_deadline(0.02)
    assert handler.readPort(1) == b""
    handler.closePort()


def test_the_feetech_wait_needs_no_file_descriptor():
    port = SerialPort("loop://", 1_000_000, wait=PortWait.PYSERIAL)
    port._serial = loopback()  # opened by URL: SerialPort.open takes device names
    port.write(b"\x01\x02\x03")
    assert port.read(2, time.monotonic() + 0.05) == b"\x01\x02"
    assert port.discard_waiting() == 1
    port.write(b"\x04\x05")
    assert port.drain(0.01) == 2
    start = time.monotonic()
    assert port.read(1, start + 0.03) == b""
    assert time.monotonic() - start >= 0.029
    port.close()


# --- Dynamixel --------------------------------------------------------------------------


@pytest.fixture
def dxl(open_bus) -> Iterator[tuple[object, DynamixelBus]]:
    vbus = open_bus({1: "XM430-W350", 2: "XL430-W250"}, initial_positions={2: 1000})
    bus = DynamixelBus(vbus.port, 1_000_000, 2, retries=0, margin_ms=MARGIN_MS, latency_ms=0.0)
    assert bus.port.wait is PortWait.PYSERIAL
    bus.open()
    yield vbus, bus
    bus.close()


def test_dynamixel_ping_read_write(dxl):
    vbus, bus = dxl
    assert bus.ping(1) == 1020
    assert bus.ping(2) == 1060
    assert bus.read(2, 132, 4) == ((1000).to_bytes(4, "little"), 0)
    assert bus.write(1, 64, b"\x01") == 0  # Torque Enable
    assert vbus.register(1, N.TORQUE_ENABLE) == 1
    with pytest.raises(ServoError):
        bus.write(1, 132, bytes(4))  # Present Position is read-only
    assert bus.broadcast_ping().keys() == {1, 2}


@pytest.mark.parametrize("method", [ReadMethod.SYNC_READ, ReadMethod.FAST_SYNC_READ])
def test_dynamixel_sync_read_and_write(dxl, method):
    vbus, bus = dxl
    replies = bus.group_read(method, [(1, 132, 4), (2, 132, 4)])
    assert [int.from_bytes(replies[i].data, "little") for i in (1, 2)] == [2048, 1000]
    bus.send_sync_write(bus.sync_write_packet(116, 4, {1: (1500).to_bytes(4, "little")}))
    bus.read(1, 7, 1)  # one more round trip: the sync write was served before it
    assert vbus.register(1, N.GOAL_POSITION) == 1500


def test_dynamixel_missing_servo_times_out_at_its_deadline(dxl):
    _, bus = dxl
    deadline = MARGIN_MS / 1000.0
    assert_timed_out_at_the_deadline(timed(bus.ping, 9), deadline)
    assert_timed_out_at_the_deadline(timed(bus.read, 9, 132, 4), deadline)
    group = [(1, 132, 4), (9, 132, 4)]
    assert_timed_out_at_the_deadline(timed(bus.group_read, ReadMethod.SYNC_READ, group), deadline)
    assert bus.ping(1) == 1020  # the bus still works after them


def test_dynamixel_port_error_when_the_bus_goes_away(open_bus):
    vbus = open_bus({1: "XM430-W350"})
    bus = DynamixelBus(vbus.port, 1_000_000, 2, retries=0, margin_ms=MARGIN_MS)
    bus.open()
    try:
        vbus.stop()
        with pytest.raises(PortError):
            bus.ping(1)
    finally:
        bus.close()


async def test_dynamixel_backend_cycles_on_the_pyserial_wait(open_bus):
    servos = [ServoSpec(1, "XM430-W350", "a"), ServoSpec(2, "XM430-W350", "b")]
    vbus = open_bus(servos)
    async with DynamixelBackend(BusSpec(vbus.port, 1_000_000, 2), servos, margin_ms=100) as arm:
        await arm.set_torque(True)
        for _ in range(20):  # read (fast sync read) then write (sync write), as a run does
            state = await arm.read()
            await arm.write({"a": 0.3, "b": -0.2})
        assert state.counters.timeouts == 0
        ticks = round(0.3 / (2 * math.pi / 4096))
        assert vbus.register(1, N.GOAL_POSITION) == 2048 + ticks
        assert vbus.register(2, N.GOAL_POSITION) == 2048 - round(0.2 / (2 * math.pi / 4096))
    assert vbus.register(1, N.TORQUE_ENABLE) == 0


# --- Feetech ----------------------------------------------------------------------------

STS = feetech_model("STS3215")
GOAL, PRESENT, TORQUE = (
    STS.register(n) for n in (F.GOAL_POSITION, F.PRESENT_POSITION, F.TORQUE_ENABLE)
)


@pytest.fixture
def fvbus() -> Iterator[FeetechVirtualBus]:
    servos = {1: "STS3215", 2: "STS3215"}
    with FeetechVirtualBus(servos, 1_000_000, return_delay_time=0) as bus:
        yield bus
        assert bus.errors == []


@pytest.fixture
def fbus(fvbus) -> Iterator[FeetechBus]:
    bus = FeetechBus(fvbus.port, 1_000_000, retries=0, margin_ms=MARGIN_MS)
    assert bus.port.wait is PortWait.PYSERIAL
    bus.open()
    yield bus
    bus.close()


def test_feetech_ping_read_write(fvbus, fbus):
    assert fbus.ping(1) == 0
    assert fbus.read(2, PRESENT.address, 2) == (PRESENT.encode(2048), 0)
    assert fbus.write(1, TORQUE.address, b"\x01") == 0
    assert fvbus.register(1, F.TORQUE_ENABLE) == 1


def test_feetech_sync_read_and_write(fvbus, fbus):
    fbus.sync_write(GOAL.address, 2, {1: GOAL.encode(1500), 2: GOAL.encode(2500)})
    replies = fbus.sync_read(PRESENT.address, 2, [1, 2])
    assert replies == {1: (PRESENT.encode(2048), 0), 2: (PRESENT.encode(2048), 0)}
    assert [fvbus.register(i, F.GOAL_POSITION) for i in (1, 2)] == [1500, 2500]


def test_feetech_missing_servo_times_out_at_its_deadline(fvbus, fbus):
    deadline = MARGIN_MS / 1000.0
    assert_timed_out_at_the_deadline(timed(fbus.ping, 9), deadline)
    assert_timed_out_at_the_deadline(timed(fbus.read, 9, PRESENT.address, 2), deadline)
    assert_timed_out_at_the_deadline(timed(fbus.sync_read, PRESENT.address, 2, [1, 9]), deadline)
    assert fbus.ping(1) == 0  # late bytes were dropped; the bus still works


def test_feetech_port_error_when_the_bus_goes_away(fvbus, fbus):
    fvbus.stop()
    with pytest.raises(PortError):
        fbus.ping(1)


async def test_feetech_backend_cycles_on_the_pyserial_wait(fvbus):
    servos = [ServoSpec(1, "STS3215", "a"), ServoSpec(2, "STS3215", "b")]
    spec = BusSpec(fvbus.port, family="feetech")
    async with FeetechBackend(spec, servos, margin_ms=100) as arm:
        await arm.set_torque(True)
        for _ in range(20):
            state = await arm.read()
            await arm.write({"a": 0.5, "b": -0.25})
        await arm.read()  # queued behind the last write
        assert state.counters.timeouts == 0
        tick = 2 * math.pi / 4096
        assert fvbus.register(1, F.GOAL_POSITION) == 2048 + round(0.5 / tick)
        assert fvbus.register(2, F.GOAL_POSITION) == 2048 - round(0.25 / tick)
    assert [fvbus.register(i, F.TORQUE_ENABLE) for i in (1, 2)] == [0, 0]
