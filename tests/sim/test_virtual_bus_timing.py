"""Wire timing, the configuration helpers and the sim-bus command."""

import subprocess
import sys
import time

import pytest
from dynamixel_sdk import COMM_SUCCESS, GroupSyncRead, PacketHandler, PortHandler

from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.timing import ReadMethod
from hilbot.hal.errors import CommTimeout, ConfigError
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.pty_server import BITS_PER_BYTE
from hilbot.sim.virtual_bus import VirtualBus


def sync_read_time(open_sdk, bus: VirtualBus, baudrate: int, ids: list[int]) -> float:
    sdk = open_sdk(bus, 2, baudrate)
    reader = GroupSyncRead(sdk.port, sdk.packet, 132, 4)
    for servo_id in ids:
        reader.addParam(servo_id)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        assert reader.txRxPacket() == COMM_SUCCESS
        times.append(time.perf_counter() - start)
    sdk.port.closePort()
    return min(times)


def test_a_sync_read_takes_at_least_its_wire_time_at_57600(sdk_on):
    ids = [1, 2, 3]
    with running_virtual_bus(dict.fromkeys(ids, "XM430-W350"), baudrate=57600) as bus:
        elapsed = sync_read_time(sdk_on, bus, 57600, ids)
    instruction = 10 + 4 + len(ids)  # header..inst + addr/len + ids + CRC
    replies = len(ids) * (11 + 4)  # status packet with 4 data bytes
    wire = (instruction + replies) * BITS_PER_BYTE / 57600
    return_delay = len(ids) * 500e-6  # factory Return Delay Time 250 × 2 µs
    assert elapsed >= wire + return_delay  # ≈ 12.2 ms
    assert elapsed < 3 * (wire + return_delay) + 0.03


def test_return_delay_time_adds_per_reply(sdk_on):
    ids = [1, 2, 3, 4]
    with running_virtual_bus(dict.fromkeys(ids, "XM430-W350"), return_delay_time=250) as bus:
        elapsed = sync_read_time(sdk_on, bus, 1_000_000, ids)
    wire = (10 + 4 + len(ids) + len(ids) * (11 + 4)) * BITS_PER_BYTE / 1_000_000  # 0.78 ms
    # Never earlier than the wire plus 500 µs per reply (a machine under load may add more).
    assert elapsed >= wire + len(ids) * 500e-6


def test_bad_bus_configs_name_the_servo():
    with pytest.raises(ConfigError, match=r"servo 2: AX-12A speaks Protocol 1\.0") as info:
        VirtualBus({1: "XM430-W350", 2: "AX-12A"})
    assert info.value.servo_id == 2
    with pytest.raises(ConfigError, match="unknown Dynamixel model"):
        VirtualBus({1: "XM999"})
    with pytest.raises(ConfigError, match="cannot run at 250000"):
        VirtualBus({1: "XM430-W350"}, baudrate=250_000)
    with pytest.raises(ConfigError, match="twice"):
        VirtualBus([ServoSpec(1, "XM430-W350", "a"), ServoSpec(1, "XM430-W350", "b")])


def test_from_config_and_joint_space_initial_positions(sdk_on):
    servos = [
        ServoSpec(1, "XM430-W350", "shoulder", offset=0.2),
        ServoSpec(2, "XM430-W350", "shoulder", offset=0.2, direction=-1, shadow_of=1),
    ]
    with running_virtual_bus(servos, initial_positions={"shoulder": 0.7}) as bus:
        sdk = sdk_on(bus, 2, 1_000_000)
        one = sdk.packet.read4ByteTxRx(sdk.port, 1, 132)[0]
        two = sdk.packet.read4ByteTxRx(sdk.port, 2, 132)[0]
        sdk.port.closePort()
    assert one - 2048 == round(0.5 / (2 * 3.141592653589793 / 4096))
    assert two - 2048 == -(one - 2048)  # the mirrored shadow
    bus = VirtualBus.from_config(servos, BusSpec("ignored", 57600, 2))
    assert (bus.protocol, bus.baudrate) == (2, 57600)


async def test_it_is_an_async_context_manager():
    async with running_virtual_bus({7: "XL330-M288"}) as bus:
        port = PortHandler(bus.port)
        assert port.openPort() and port.setBaudRate(1_000_000)
        assert PacketHandler(2.0).ping(port, 7)[:2] == (1200, COMM_SUCCESS)
        port.closePort()
    assert not bus.running


def test_the_sim_bus_command_serves_a_port():
    command = [sys.executable, "-m", "hilbot", "sim-bus", "--servo", "3:XM430-W350"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("main: /dev/")
            port = PortHandler(line.split()[1])
            assert port.openPort() and port.setBaudRate(1_000_000)
            # A fresh process on a busy machine may miss the first deadline: retry.
            pings = [PacketHandler(2.0).ping(port, 3)[:2] for _ in range(3)]
            assert (1020, COMM_SUCCESS) in pings
            port.closePort()
        finally:
            process.terminate()
        assert process.wait(timeout=10) == 0


def test_the_sim_bus_command_rejects_bad_input(capsys):
    from hilbot.driver.cli import main

    assert main(["sim-bus", "--servo", "x:XM430-W350"]) == 2
    assert "expected ID:MODEL" in capsys.readouterr().err
    assert main(["sim-bus"]) == 2
    assert "--servo" in capsys.readouterr().err


def test_an_idle_bus_costs_no_cpu():
    with running_virtual_bus({1: "XM430-W350"}) as bus:
        assert bus.running
        start = time.process_time()
        time.sleep(0.5)
        assert time.process_time() - start < 0.05  # blocked in poll, not spinning


def test_an_injected_clock_drives_the_dynamics(sdk_on, clock):
    with running_virtual_bus({1: "XM430-W350"}, clock=clock, return_delay_time=0) as bus:
        sdk = sdk_on(bus, 2, 1_000_000)
        sdk.packet.write1ByteTxRx(sdk.port, 1, 64, 1)
        sdk.packet.write4ByteTxRx(sdk.port, 1, 116, 3000)
        time.sleep(0.2)  # wall time passes, model time does not
        assert sdk.packet.read4ByteTxRx(sdk.port, 1, 132)[0] == 2048
        for _ in range(8):
            clock.advance(0.25)
            position, result, _ = sdk.packet.read4ByteTxRx(sdk.port, 1, 132)
        assert result == COMM_SUCCESS and abs(position - 3000) <= 1
        sdk.port.closePort()


ATTEMPTS = 30  # write + read cycles allowed for three that do not meet a scheduling stall


def test_a_write_without_reply_holds_the_wire_for_the_next_read():
    """A sync write has no reply, but its bytes take wire time before the next read's.

    The host's reply deadline counts from when both packets left the adapter, so the
    read succeeds at 57600 bit/s with the default 3 ms margin (the write alone takes 7.6 ms).
    """
    ids = [1, 2, 3, 4, 5, 6]
    with running_virtual_bus(
        dict.fromkeys(ids, "XM430-W350"), baudrate=57600, return_delay_time=0
    ) as bus:
        host = DynamixelBus(bus.port, 57600, 2, retries=0)
        host.open()
        times = []
        timeouts = 0
        try:
            # A host that did not count the write's 7.6 ms would time out on every read;
            # a busy machine only delays the bus thread now and then, so most reads of a
            # few dozen succeed (each cycle starts clean: a late reply is flushed).
            for k in range(ATTEMPTS):
                goals = {i: (2048 + k).to_bytes(4, "little") for i in ids}
                start = time.perf_counter()
                host.sync_write(116, 4, goals)
                try:
                    replies = host.group_read(ReadMethod.SYNC_READ, [(i, 132, 4) for i in ids])
                except CommTimeout:
                    timeouts += 1
                    time.sleep(0.05)
                    host.port.clearPort()
                    continue
                times.append(time.perf_counter() - start)
                assert sorted(replies) == ids
                if len(times) == 3:
                    break
        finally:
            host.close()
        assert bus.errors == []
    assert len(times) == 3, f"{timeouts} of {ATTEMPTS} reads timed out"
    write = 10 + 4 + len(ids) * (1 + 4)  # 44 B
    read = 10 + 4 + len(ids) + len(ids) * (11 + 4)  # 110 B
    assert min(times) >= (write + read) * BITS_PER_BYTE / 57600  # ≈ 26.7 ms
