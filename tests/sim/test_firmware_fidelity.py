"""What LeRobot's own code showed the virtual servos did unlike their firmware, checked
with clients we did not write (feetech-servo-sdk, dynamixel-sdk, rustypot):

- the STS factory block (80 ~ 86): LeRobot writes 254 to Maximum_Acceleration (85);
- Goal PWM and Goal Current power up at PWM Limit and Current Limit (e-manual), so a
  gripper in current-based position mode moves without a Goal Current written first;
- a servo answers only at its own bit rate: a scan finds it there and nowhere else,
  at standard and non-standard rates (76800, 128000, 1152000: ``BOTHER`` on Linux).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dynamixel_sdk as dxl
import pytest
import rustypot
import scservo_sdk as scs
from scservo_sdk import port_handler as scs_port_handler

from hilbot.hal.dynamixel.tables import RegisterName as D
from hilbot.hal.feetech.tables import FeetechRegister as F
from hilbot.sim import running_virtual_bus
from hilbot.sim.virtual_bus import FeetechVirtualBus, running_feetech_bus
from tests.sim.conftest import open_sdk

TIMEOUT = 1.0  # rustypot's read timeout [s]
#: Feetech rates: the vendor's table (0-7), and LeRobot's scan list (which adds 4800,
#: 9600, 14400 and 19200 and lacks 76800).
FEETECH_SDK_RATES = (4800, 9600, 14400, 19200, 38400, 57600, 115200, 128000, 250000, 500000,
                     1_000_000)  # fmt: skip
#: What dynamixel-sdk can set, the rates the issue found the servos "at" among them.
DXL_RATES = (9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 576000, 921600,
             1_000_000, 1_152_000, 2_000_000, 2_500_000, 3_000_000, 3_500_000,
             4_000_000)  # fmt: skip


@pytest.fixture(autouse=True)
def _scs_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """About 100 ms per unanswered ping: a scan waits it out at every wrong rate."""
    monkeypatch.setattr(scs_port_handler, "LATENCY_TIMER", 50)


def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def fbus() -> Iterator[FeetechVirtualBus]:
    with running_feetech_bus([(1, "STS3215"), (2, "STS3215")]) as bus:
        yield bus
        assert bus.errors == []


def _scs(port: str, rate: int = 1_000_000) -> tuple[scs.PortHandler, object]:
    handler = scs.PortHandler(port)
    assert handler.openPort()
    assert handler.setBaudRate(rate)
    return handler, scs.PacketHandler(0)


# ---------------------------------------------------------------- Feetech factory block


def test_sdk_writes_and_reads_maximum_acceleration_as_lerobot_does(
    fbus: FeetechVirtualBus,
) -> None:
    port, ph = _scs(fbus.port)
    try:
        # LeRobot's configure_motors: Maximum_Acceleration (85) and Acceleration (41) := 254.
        assert ph.write1ByteTxRx(port, 1, 85, 254) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        assert ph.write1ByteTxRx(port, 1, 41, 254) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        assert ph.read1ByteTxRx(port, 1, 85) == (254, scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        assert fbus.register(1, F.ACCELERATION_LIMIT) == 254
        for address in range(80, 87):  # every byte of the block is a register
            assert ph.write1ByteTxRx(port, 2, address, address) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        data, result, _ = ph.readTxRx(port, 2, 80, 7)  # type: ignore[attr-defined]
        assert (list(data), result) == (list(range(80, 87)), scs.COMM_SUCCESS)
    finally:
        port.closePort()


def test_rustypot_reads_and_writes_the_factory_block(fbus: FeetechVirtualBus) -> None:
    c = rustypot.Sts3215PyController(fbus.port, 1_000_000, TIMEOUT)
    try:
        c.write_maximum_acceleration(2, 254)
        c.write_acceleration_multiplier(2, 3)
        assert c.read_maximum_acceleration(2) == [254]
        assert c.read_acceleration_multiplier(2) == [3]
        assert fbus.register(2, F.ACCELERATION_MULTIPLIER) == 3
    finally:
        c.close()


def test_the_factory_block_survives_a_power_cycle_when_saved(fbus: FeetechVirtualBus) -> None:
    port, ph = _scs(fbus.port)
    try:
        assert ph.write1ByteTxRx(port, 1, 85, 200) == (scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
        fbus.faults(1).power_cycles += 1
        _until(lambda: ph.read1ByteTxRx(port, 1, 85)[1] == scs.COMM_SUCCESS)  # type: ignore[attr-defined]
        assert ph.read1ByteTxRx(port, 1, 85) == (200, scs.COMM_SUCCESS, 0)  # type: ignore[attr-defined]
    finally:
        port.closePort()


# ---------------------------------------------------------------- Dynamixel goal limits


def test_goal_pwm_and_goal_current_power_up_at_their_limits() -> None:
    servos = {1: "XM430-W350", 2: "XL330-M288", 3: "XL430-W250"}
    with running_virtual_bus(servos, return_delay_time=0) as bus:
        sdk = open_sdk(bus, 2, 1_000_000)
        try:
            p = sdk.packet
            for i in servos:
                pwm_limit, _, _ = p.read2ByteTxRx(sdk.port, i, 36)
                goal_pwm, result, _ = p.read2ByteTxRx(sdk.port, i, 100)
                assert (goal_pwm, result) == (pwm_limit, dxl.COMM_SUCCESS) and pwm_limit == 885
            for i, limit in ((1, 1193), (2, 1750)):  # e-manual Current Limit(38) of each model
                assert p.read2ByteTxRx(sdk.port, i, 38)[0] == limit
                assert p.read2ByteTxRx(sdk.port, i, 102) == (limit, dxl.COMM_SUCCESS, 0)
            # A lower limit is where the goal starts after a reboot, and after a mode change.
            assert p.write2ByteTxRx(sdk.port, 2, 38, 600) == (dxl.COMM_SUCCESS, 0)
            assert p.write2ByteTxRx(sdk.port, 2, 102, 100) == (dxl.COMM_SUCCESS, 0)
            assert p.reboot(sdk.port, 2) == (dxl.COMM_SUCCESS, 0)
            _until(lambda: p.read2ByteTxRx(sdk.port, 2, 102)[1] == dxl.COMM_SUCCESS)
            assert p.read2ByteTxRx(sdk.port, 2, 102)[0] == 600
            assert p.write2ByteTxRx(sdk.port, 2, 102, 100) == (dxl.COMM_SUCCESS, 0)
            assert p.write4ByteTxRx(sdk.port, 2, 112, 50) == (dxl.COMM_SUCCESS, 0)
            assert p.write1ByteTxRx(sdk.port, 2, 11, 5) == (dxl.COMM_SUCCESS, 0)
            assert p.read2ByteTxRx(sdk.port, 2, 102)[0] == 600
            assert p.read4ByteTxRx(sdk.port, 2, 112)[0] == 0  # Profile Velocity := 0
            assert bus.register(2, D.GOAL_CURRENT) == 600
        finally:
            sdk.port.closePort()
        assert bus.errors == []


def test_a_current_based_gripper_moves_without_a_goal_current_written() -> None:
    """LeRobot's Koch gripper: mode 5, torque on, a goal; no Goal Current written."""
    with running_virtual_bus({6: "XL330-M288"}, return_delay_time=0) as bus:
        sdk = open_sdk(bus, 2, 1_000_000)
        try:
            p = sdk.packet
            assert p.write1ByteTxRx(sdk.port, 6, 11, 5) == (dxl.COMM_SUCCESS, 0)
            assert p.write1ByteTxRx(sdk.port, 6, 64, 1) == (dxl.COMM_SUCCESS, 0)
            start = p.read4ByteTxRx(sdk.port, 6, 132)[0]
            goal = start + 600
            assert p.write4ByteTxRx(sdk.port, 6, 116, goal) == (dxl.COMM_SUCCESS, 0)
            _until(lambda: abs(p.read4ByteTxRx(sdk.port, 6, 132)[0] - goal) <= 10)
        finally:
            sdk.port.closePort()


# ---------------------------------------------------------------- bit rates


def test_a_feetech_scan_finds_the_servos_only_at_their_rate(fbus: FeetechVirtualBus) -> None:
    found = []
    for rate in FEETECH_SDK_RATES:
        port, ph = _scs(fbus.port, rate)
        try:
            if ph.ping(port, 1)[1] == scs.COMM_SUCCESS:  # type: ignore[attr-defined]
                found.append(rate)
        finally:
            port.closePort()
    assert found == [1_000_000]


def test_a_feetech_servo_moved_to_76800_answers_there_only(fbus: FeetechVirtualBus) -> None:
    """Baud Rate 5 is 76800 by the vendor's table (LeRobot's says 57600): rustypot sets
    that non-standard rate on the pty, and servo 2 answers at it, not at 57600 or 1 Mbps."""
    port, ph = _scs(fbus.port)
    try:
        ph.write1ByteTxRx(port, 2, 6, 5)  # type: ignore[attr-defined]  # answered at the new rate
    finally:
        port.closePort()
    for rate, ids in ((76_800, {2}), (57_600, set()), (1_000_000, {1}), (128_000, set())):
        c = rustypot.Sts3215PyController(fbus.port, rate, 0.2)
        try:
            assert {i for i in (1, 2) if c.ping(i)} == ids, rate
        finally:
            c.close()


def test_a_dynamixel_scan_finds_the_servos_only_at_their_rate() -> None:
    with running_virtual_bus({1: "XM430-W350", 2: "XL330-M288"}, return_delay_time=0) as bus:
        found = []
        for rate in DXL_RATES:
            sdk = open_sdk(bus, 2, rate)
            try:
                if sdk.packet.ping(sdk.port, 1)[1] == dxl.COMM_SUCCESS:
                    found.append(rate)
            finally:
                sdk.port.closePort()
        assert found == [1_000_000]
        assert bus.errors == []


def test_a_host_that_sets_no_rate_is_heard_by_no_servo() -> None:
    """A pty opened without a rate is at the kernel's default (38400 on Linux)."""
    import os

    with running_virtual_bus({1: "XM430-W350"}, baudrate=57_600, return_delay_time=0) as bus:
        fd = os.open(bus.port, os.O_RDWR | os.O_NOCTTY)
        try:
            rate = bus.host_rate()
            assert rate != 57_600
            assert bus.handler.online() == {}
        finally:
            os.close(fd)


# ---------------------------------------------------------------- EEPROM across restarts


def test_feetech_eeprom_survives_a_restart_of_the_bus(tmp_path: Path) -> None:
    """setup_motor's writes (id, baud) and calibration's (offset, limits) come back."""
    state = tmp_path / "so101.json"
    with running_feetech_bus([(1, "STS3215"), (2, "STS3215")], eeprom_file=state) as bus:
        port, ph = _scs(bus.port)
        try:
            w1, w2 = ph.write1ByteTxRx, ph.write2ByteTxRx  # type: ignore[attr-defined]
            assert w2(port, 1, 31, 300) == (scs.COMM_SUCCESS, 0)  # Homing Offset
            assert w2(port, 1, 11, 3000) == (scs.COMM_SUCCESS, 0)  # Max Angle Limit
            assert w1(port, 1, 85, 254) == (scs.COMM_SUCCESS, 0)  # Maximum_Acceleration
            assert w1(port, 1, 41, 254) == (scs.COMM_SUCCESS, 0)  # Acceleration: RAM
            w1(port, 2, 5, 7)  # ID 2 -> 7 (answered by the new id)
            w1(port, 7, 55, 1)  # Lock 1: what follows is not saved
            assert w2(port, 7, 9, 100) == (scs.COMM_SUCCESS, 0)  # Min Angle Limit, unsaved
        finally:
            port.closePort()
        assert bus.errors == []
    assert state.exists()
    with running_feetech_bus([(1, "STS3215"), (2, "STS3215")], eeprom_file=state) as bus:
        port, ph = _scs(bus.port)
        try:
            r1, r2 = ph.read1ByteTxRx, ph.read2ByteTxRx  # type: ignore[attr-defined]
            assert r2(port, 1, 31)[:2] == (300, scs.COMM_SUCCESS)
            assert r2(port, 1, 11)[:2] == (3000, scs.COMM_SUCCESS)
            assert r1(port, 1, 85)[:2] == (254, scs.COMM_SUCCESS)
            assert r1(port, 1, 41)[:2] == (0, scs.COMM_SUCCESS)
            assert ph.ping(port, 2)[1] != scs.COMM_SUCCESS  # type: ignore[attr-defined]
            assert r1(port, 7, 5)[:2] == (7, scs.COMM_SUCCESS)
            assert r2(port, 7, 9)[:2] == (0, scs.COMM_SUCCESS)
        finally:
            port.closePort()


def test_rustypot_finds_a_saved_baud_rate_after_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "bus.json"
    with running_feetech_bus([(1, "STS3215")], eeprom_file=state) as bus:
        c = rustypot.Sts3215PyController(bus.port, 1_000_000, TIMEOUT)
        try:
            c.write_register(1, "baudrate", 4)  # 115200
        except Exception:  # the reply comes at the new rate
            pass
        finally:
            c.close()
    with running_feetech_bus([(1, "STS3215")], eeprom_file=state) as bus:
        for rate, heard in ((1_000_000, False), (115_200, True)):
            c = rustypot.Sts3215PyController(bus.port, rate, 0.3)
            try:
                assert c.ping(1) is heard, rate
            finally:
                c.close()


def test_dynamixel_eeprom_survives_a_restart_and_a_new_model_starts_fresh(
    tmp_path: Path,
) -> None:
    state = tmp_path / "koch.json"
    servos = {1: "XL430-W250", 2: "XL330-M288"}
    with running_virtual_bus(servos, return_delay_time=0, eeprom_file=state) as bus:
        sdk = open_sdk(bus, 2, 1_000_000)
        try:
            p = sdk.packet
            assert p.write4ByteTxRx(sdk.port, 1, 20, 1234) == (dxl.COMM_SUCCESS, 0)
            assert p.write1ByteTxRx(sdk.port, 2, 11, 5) == (dxl.COMM_SUCCESS, 0)
            assert p.write1ByteTxRx(sdk.port, 2, 7, 9) == (dxl.COMM_SUCCESS, 0)
            assert p.write1ByteTxRx(sdk.port, 9, 65, 1) == (dxl.COMM_SUCCESS, 0)  # LED: RAM
        finally:
            sdk.port.closePort()
    with running_virtual_bus(servos, return_delay_time=0, eeprom_file=state) as bus:
        sdk = open_sdk(bus, 2, 1_000_000)
        try:
            p = sdk.packet
            assert p.read4ByteTxRx(sdk.port, 1, 20)[:2] == (1234, dxl.COMM_SUCCESS)
            assert p.read1ByteTxRx(sdk.port, 9, 11)[:2] == (5, dxl.COMM_SUCCESS)
            assert p.read1ByteTxRx(sdk.port, 9, 65)[:2] == (0, dxl.COMM_SUCCESS)
            assert p.ping(sdk.port, 2)[1] != dxl.COMM_SUCCESS
        finally:
            sdk.port.closePort()
        assert bus.eeprom_notes == []
    # The second servo replaced by another model: it powers up factory-fresh (id 2).
    swapped = {1: "XL430-W250", 2: "XM430-W350"}
    with running_virtual_bus(swapped, return_delay_time=0, eeprom_file=state) as bus:
        assert bus.servos[0].id == 1 and bus.servos[1].id == 2
        assert len(bus.eeprom_notes) == 1 and "XM430-W350" in bus.eeprom_notes[0]
        assert bus.register(1, D.HOMING_OFFSET) == 1234


def test_a_broken_eeprom_file_is_one_line_naming_it(tmp_path: Path) -> None:
    state = tmp_path / "bad.json"
    state.write_text("{not json")
    bus = running_feetech_bus([(1, "STS3215")], eeprom_file=state)
    with pytest.raises(ValueError, match=r"bad\.json: not an EEPROM file"):
        bus.start()
    bus.stop()


# ---------------------------------------------------------------- servos plugged in one at a time


def _broadcast_ping(port: scs.PortHandler, ph: object) -> list[int]:
    """LeRobot's Feetech broadcast ping: a PING to 0xFE, then every reply in a window."""
    port.clearPort()
    assert ph.txPacket(port, [0xFF, 0xFF, 0xFE, 2, 1, 0]) == scs.COMM_SUCCESS  # type: ignore[attr-defined]
    port.setPacketTimeoutMillis(300)
    ids = []
    while True:
        packet, result = ph.rxPacket(port)  # type: ignore[attr-defined]
        if result != scs.COMM_SUCCESS:
            return sorted(ids)
        ids.append(packet[2])


def test_lerobot_setup_motors_flow_on_one_feetech_bus(tmp_path: Path) -> None:
    """Each factory servo (id 1, 1 Mbps) is found alone, given its id and baud rate, and
    the next search finds the next one; at the end the arm answers at ids 1-3, and a
    restart of the bus keeps them."""
    from hilbot.sim.pty_server import PlugIn

    state = tmp_path / "arm.json"
    servos = [(1, "STS3215"), (2, "STS3215"), (3, "STS3215")]
    lines: list[str] = []
    with running_feetech_bus(servos, eeprom_file=state) as bus:
        plug_in = PlugIn(bus, bus.servos, report=lines.append)
        plug_in.begin()
        bus.plug_in = plug_in
        for target in (3, 2, 1):  # LeRobot sets up the last motor first
            found = {}
            for rate in (57_600, 115_200, 1_000_000):  # the search over bit rates
                port, ph = _scs(bus.port, rate)
                try:
                    found[rate] = _broadcast_ping(port, ph)
                finally:
                    port.closePort()
            assert found == {57_600: [], 115_200: [], 1_000_000: [1]}, target
            port, ph = _scs(bus.port)
            try:
                ph.write1ByteTxRx(port, 1, 5, target)  # type: ignore[attr-defined]  # ID
                ph.write1ByteTxRx(port, target, 6, 0)  # type: ignore[attr-defined]  # Baud Rate
            finally:
                port.closePort()
        port, ph = _scs(bus.port)
        try:
            assert _broadcast_ping(port, ph) == [1, 2, 3]
        finally:
            port.closePort()
        assert plug_in.finished.is_set()
        assert bus.errors == []
    assert any("every servo is connected" in line for line in lines)
    with running_feetech_bus(servos, eeprom_file=state) as bus:
        port, ph = _scs(bus.port)
        try:
            assert _broadcast_ping(port, ph) == [1, 2, 3]
        finally:
            port.closePort()


def test_dynamixel_setup_flow_finds_factory_servos_at_57600(tmp_path: Path) -> None:
    """X-series servos leave the factory at 57600 bit/s (Baud Rate 1): found there alone,
    moved to 1 Mbps with their ids, then the next; Enter (``advance``) also moves on."""
    from hilbot.sim.pty_server import PlugIn

    with running_virtual_bus({1: "XL430-W250", 2: "XL330-M288"}, return_delay_time=0) as bus:
        plug_in = PlugIn(bus, bus.servos)
        plug_in.begin()
        bus.plug_in = plug_in
        for target in (2, 1):
            found = {}
            for rate in (57_600, 1_000_000):
                sdk = open_sdk(bus, 2, rate)
                try:
                    ids, result = sdk.packet.broadcastPing(sdk.port)
                    found[rate] = sorted(ids) if result == dxl.COMM_SUCCESS else []
                finally:
                    sdk.port.closePort()
            assert found == {57_600: [1], 1_000_000: []}, target
            sdk = open_sdk(bus, 2, 57_600)
            try:
                assert sdk.packet.write1ByteTxRx(sdk.port, 1, 7, target) == (dxl.COMM_SUCCESS, 0)
                assert sdk.packet.write1ByteTxRx(sdk.port, target, 8, 3) == (dxl.COMM_SUCCESS, 0)
            finally:
                sdk.port.closePort()
            if target == 2:
                plug_in.advance()  # Enter, without waiting for the next search
        plug_in.advance()
        sdk = open_sdk(bus, 2, 1_000_000)
        try:
            ids, result = sdk.packet.broadcastPing(sdk.port)
            assert (sorted(ids), result) == ([1, 2], dxl.COMM_SUCCESS)
        finally:
            sdk.port.closePort()


# ---------------------------------------------------------------- the hand's start


def test_the_hand_waits_for_a_client_then_sweeps() -> None:
    """``--hand-start open``: the arm lies still until a client talks on the port."""
    from hilbot.hal.mapping import ServoSpec
    from hilbot.sim.hand import hand_on

    specs = (ServoSpec(1, "XL430-W250", "a"),)
    with running_virtual_bus(specs, return_delay_time=0) as bus:

        def position() -> float:
            with bus.lock:
                return float(bus.model.position[0])

        begin = bus.first_packet
        with hand_on(bus, specs, "sweep", {"a": (-1.0, 1.0)}, {"a": 0.0}, begin=begin) as hand:
            assert not begin.is_set()
            time.sleep(0.3)  # a hand that started would have moved by now
            assert position() == 0.0 and not hand.joint_positions()["a"]
            sdk = open_sdk(bus, 2, 1_000_000)  # the client comes and talks
            try:
                sdk.packet.ping(sdk.port, 1)
            finally:
                sdk.port.closePort()
            assert begin.is_set()
            _until(lambda: abs(position()) > 0.1)
