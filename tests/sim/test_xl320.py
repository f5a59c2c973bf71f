"""A virtual bus of Dynamixel XL-320 servos: hilbot's real backend and ROBOTIS' SDK drive it.

The XL-320 speaks Protocol 2.0 with a control table of its own (e-manual, XL-320):
model number 350, Goal Position at 30 and Present Position at 37, 2 bytes, 0-1023 over
300 degrees with 512 in the middle, Present Load at 41 with the direction in bit 10.
"""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from dynamixel_sdk import COMM_SUCCESS, PacketHandler, PortHandler

from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.dynamixel.tools import scan
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus

GOAL_POSITION, PRESENT_POSITION, PRESENT_LOAD, TORQUE_ENABLE = 30, 37, 41, 24
CW_ANGLE_LIMIT, CCW_ANGLE_LIMIT = 6, 8
DATA_RANGE_ERROR = 4  # Protocol 2.0 status packet, Error field
TICK = math.radians(300.0) / 1024  # [rad]


def test_the_scan_finds_xl320s_by_their_model_number():
    with running_virtual_bus({3: "XL-320", 7: "XL-320"}) as bus:
        found = scan(bus.port, [57_600, 1_000_000], protocols=(2,))
    assert [(f.id, f.model_number, f.model, f.baudrate) for f in found] == [
        (3, 350, "XL-320", 1_000_000),
        (7, 350, "XL-320", 1_000_000),
    ]


async def test_the_real_backend_moves_xl320s_over_their_300_degrees():
    servos = [ServoSpec(1, "XL-320", "pan"), ServoSpec(2, "XL-320", "tilt", direction=-1)]
    with running_virtual_bus(servos, initial_positions={"pan": 0.3}, return_delay_time=0) as bus:
        spec = BusSpec(bus.port, 1_000_000, 2)
        async with DynamixelBackend(spec, servos, margin_ms=300.0) as backend:
            start = (await backend.read()).position
            assert start.tolist() == pytest.approx([0.3, 0.0], abs=TICK)
            await backend.enable_holding({"pan": float(start[0]), "tilt": float(start[1])})
            goal = {"pan": -0.8, "tilt": 1.2}
            await backend.write(goal)
            deadline = time.monotonic() + 20.0
            while True:
                position = (await backend.read()).position
                if position.tolist() == pytest.approx([-0.8, 1.2], abs=2 * TICK):
                    break
                assert time.monotonic() < deadline, f"still at {position} for {goal}"
                await asyncio.sleep(0.02)
        # tilt runs reversed: its shaft sits below the middle tick
        assert bus.register(2, RegisterName.GOAL_POSITION) == 512 - round(1.2 / TICK)
        assert bus.register(1, RegisterName.GOAL_POSITION) == 512 - round(0.8 / TICK)
    assert bus.errors == []


def test_the_sdk_reads_and_writes_the_xl320_table():
    with running_virtual_bus({1: "XL-320"}, return_delay_time=0) as bus:
        port = PortHandler(bus.port)
        assert port.openPort() and port.setBaudRate(1_000_000)
        try:
            sdk = PacketHandler(2.0)
            model, result, error = sdk.ping(port, 1)
            assert (model, result, error) == (350, COMM_SUCCESS, 0)
            assert sdk.read2ByteTxRx(port, 1, PRESENT_POSITION) == (512, COMM_SUCCESS, 0)
            assert sdk.read2ByteTxRx(port, 1, CW_ANGLE_LIMIT)[0] == 0
            assert sdk.read2ByteTxRx(port, 1, CCW_ANGLE_LIMIT)[0] == 1023
            assert sdk.write1ByteTxRx(port, 1, TORQUE_ENABLE, 1) == (COMM_SUCCESS, 0)
            # beyond 1023: the Data Range Error, and the goal stays
            assert sdk.write2ByteTxRx(port, 1, GOAL_POSITION, 1024) == (
                COMM_SUCCESS,
                DATA_RANGE_ERROR,
            )
            assert sdk.read2ByteTxRx(port, 1, GOAL_POSITION)[0] == 512
            assert sdk.write2ByteTxRx(port, 1, GOAL_POSITION, 800) == (COMM_SUCCESS, 0)
            deadline = time.monotonic() + 20.0
            while sdk.read2ByteTxRx(port, 1, PRESENT_POSITION)[0] != 800:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            # pushed back against its goal, the load reads with the direction in bit 10
            bus.set_load(1, -0.2)
            deadline = time.monotonic() + 20.0
            while True:
                load, result, _ = sdk.read2ByteTxRx(port, 1, PRESENT_LOAD)
                assert result == COMM_SUCCESS
                if load & 0x3FF > 100:
                    break
                assert time.monotonic() < deadline, f"load {load}"
                time.sleep(0.02)
            assert load <= 2047
        finally:
            port.closePort()
    assert bus.errors == []
