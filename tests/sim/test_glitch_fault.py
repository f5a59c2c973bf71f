"""The glitch fault: a reply's Present Position rewritten, the packet still valid.

On both virtual buses the glitched reply passes its CRC (Protocol 2.0) or checksum
(Protocol 1.0, Feetech) and carries the offset; the replies after the glitch are true
again. The in-process ``SimBackend`` glitches its readings the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import serial

from hilbot.hal.dynamixel import protocol as dxl
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.dynamixel.protocol import bulk_read_params, read_params, sync_read_params
from hilbot.hal.feetech import protocol as ft
from hilbot.hal.feetech.backend import FeetechBackend
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.faults import ServoFaults
from hilbot.sim.sim_backend import SimBackend
from hilbot.sim.virtual_bus import running_feetech_bus

Ins = dxl.Instruction


def exchange(link: serial.Serial, request: bytes, reply_size: int) -> bytes:
    link.reset_input_buffer()
    link.write(request)
    data = bytes(link.read(reply_size))
    assert len(data) == reply_size, f"{len(data)} of {reply_size} reply bytes"
    return data


def dxl_statuses(protocol: int, data: bytes) -> list[dxl.StatusPacket]:
    """Every status packet in ``data``; each must pass its CRC or checksum."""
    items = dxl.decode_all(protocol, dxl.PacketKind.STATUS, data)
    assert all(isinstance(item, dxl.StatusPacket) for item in items), items
    return [item for item in items if isinstance(item, dxl.StatusPacket)]


# ---------------------------------------------------------------------- the record


def test_a_glitch_lasts_for_its_replies_then_stops() -> None:
    faults = ServoFaults(3)
    assert not faults.glitching and faults.take_glitch(0.001) == 0.0
    faults.glitch(200, replies=2)
    assert [faults.take_glitch(0.001) for _ in range(3)] == [200, 200, 0.0]
    assert faults.glitched == 2
    faults.glitch(0.46, unit="rad")
    assert faults.take_glitch(0.002) == pytest.approx(230)  # in ticks of 2 mrad
    assert not faults.glitching


def test_a_glitch_rate_is_seeded_and_clear_ends_it() -> None:
    def draws(seed: int) -> list[float]:
        faults = ServoFaults(3, seed=seed)
        faults.glitch(-50, replies=None, rate=0.25)
        return [faults.take_glitch(0.001) for _ in range(400)]

    first = draws(7)
    assert first == draws(7)
    assert 60 < sum(1 for d in first if d) < 140
    faults = ServoFaults(3)
    faults.glitch(10, replies=None)
    faults.clear()
    assert not faults.glitching


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offset": math.nan}, "glitch_offset must be finite"),
        ({"offset": 1, "unit": "deg"}, "glitch_unit must be one of tick, rad"),
        ({"offset": 1, "rate": 1.5}, r"glitch_rate must be in \[0, 1\]"),
        ({"offset": 1, "replies": -1}, "glitch_replies must be >= 0"),
    ],
)
def test_bad_glitches_are_refused(kwargs: dict[str, object], message: str) -> None:
    faults = ServoFaults(3)
    with pytest.raises(ValueError, match=message):
        faults.glitch(**kwargs)  # type: ignore[arg-type]
    assert not faults.glitching


# ---------------------------------------------------------------------- Dynamixel 2.0

PRESENT_2 = 132  # X series Present Position, 4 bytes, signed


def present_2(packet: dxl.StatusPacket, at: int = 0) -> int:
    return int.from_bytes(packet.params[at : at + 4], "little", signed=True)


def test_protocol_2_read_sync_read_and_fast_sync_read_replies_are_glitched_with_valid_crcs():
    servos = {1: "XM430-W350", 2: "XM430-W350", 3: "XL430-W250"}
    with running_virtual_bus(servos, return_delay_time=0) as bus:
        with serial.Serial(bus.port, 1_000_000, timeout=2.0) as link:

            def read(servo_id: int, address: int = PRESENT_2, length: int = 4) -> bytes:
                params = read_params(2, address, length)
                wire = dxl.encode_instruction(dxl.InstructionPacket(2, servo_id, Ins.READ, params))
                return exchange(link, wire, 11 + length)

            def group(inst: Ins, ids: Sequence[int]) -> bytes:
                params = sync_read_params(PRESENT_2, 4, ids)
                wire = dxl.encode_instruction(dxl.InstructionPacket(2, 0xFE, inst, params))
                size = 8 + 8 * len(ids) if inst is Ins.FAST_SYNC_READ else 15 * len(ids)
                return exchange(link, wire, size)

            (before,) = dxl_statuses(2, read(2))
            bus.faults(2).glitch(300, replies=3)
            (glitched,) = dxl_statuses(2, read(2))
            assert present_2(glitched) == present_2(before) + 300

            # Sync read: only servo 2's status packet is rewritten.
            replies = dxl_statuses(2, group(Ins.SYNC_READ, [1, 2, 3]))
            assert [p.id for p in replies] == [1, 2, 3]
            assert present_2(replies[1]) == present_2(before) + 300
            assert present_2(replies[0]) == present_2(before)  # both at the center tick

            # Fast sync read: servo 2's slice; the slice CRCs and the packet CRC hold.
            (fast,) = dxl_statuses(2, group(Ins.FAST_SYNC_READ, [1, 2, 3]))
            parts = dxl.split_fast_status(fast, [4, 4, 4])
            values = [int.from_bytes(p.data, "little", signed=True) for p in parts]
            assert values[1] == values[0] + 300
            raw = group(Ins.FAST_SYNC_READ, [1, 2, 3])  # the glitch is used up
            assert dxl.fast_status_prefix(raw, [4, 4, 4])[1].data == parts[0].data

            # A read without Present Position in it does not use up a glitch.
            bus.faults(2).glitch(-40)
            dxl_statuses(2, read(2, address=146, length=1))  # Present Temperature
            (after,) = dxl_statuses(2, read(2, address=PRESENT_2 - 4, length=12))
            assert present_2(after, at=4) == present_2(before) - 40
            assert bus.faults(2).glitched == 4
        assert bus.errors == []


# ---------------------------------------------------------------------- Dynamixel 1.0


def test_protocol_1_read_and_bulk_read_replies_are_glitched_with_valid_checksums():
    with running_virtual_bus(
        {1: "MX-28", 2: "MX-64"}, protocol=1, return_delay_time=0, initial_positions={2: 2000}
    ) as bus:
        with serial.Serial(bus.port, 1_000_000, timeout=2.0) as link:
            wire = dxl.encode_instruction(
                dxl.InstructionPacket(1, 2, Ins.READ, read_params(1, 36, 2))
            )
            bus.faults(2).glitch(0.46, unit="rad")  # 0.088° ticks: 300
            (glitched,) = dxl_statuses(1, exchange(link, wire, 8))
            assert int.from_bytes(glitched.params, "little") == 2000 + 300
            (true,) = dxl_statuses(1, exchange(link, wire, 8))
            assert int.from_bytes(true.params, "little") == 2000

            bus.faults(1).glitch(-3000)  # below tick 0: the unsigned register holds 0
            params = bulk_read_params(1, [(1, 36, 2), (2, 36, 2)])
            bulk = dxl.encode_instruction(dxl.InstructionPacket(1, 0xFE, Ins.BULK_READ, params))
            replies = dxl_statuses(1, exchange(link, bulk, 16))
            assert [int.from_bytes(p.params, "little") for p in replies] == [0, 2000]
        assert bus.errors == []


# ---------------------------------------------------------------------- Feetech


def test_feetech_read_and_sync_read_replies_are_glitched_with_valid_checksums():
    with running_feetech_bus(
        {1: "STS3215", 2: "STS3215"}, return_delay_time=0, initial_positions={1: 100}
    ) as bus:
        with serial.Serial(bus.port, 1_000_000, timeout=2.0) as link:

            def statuses(data: bytes) -> list[ft.StatusPacket]:
                items = ft.PacketDecoder(ft.PacketKind.STATUS).feed(data)
                assert all(isinstance(i, ft.StatusPacket) for i in items), items
                return [i for i in items if isinstance(i, ft.StatusPacket)]

            def position(packet: ft.StatusPacket) -> int:
                raw = int.from_bytes(packet.params[:2], "little")  # sign-magnitude, bit 15
                return -(raw & 0x7FFF) if raw & 0x8000 else raw

            read = ft.encode_instruction(ft.read(1, 56, 2))
            bus.faults(1).glitch(-300, replies=2)  # crosses zero: the sign bit is set
            (glitched,) = statuses(exchange(link, read, 8))
            assert position(glitched) == 100 - 300

            sync = ft.encode_instruction(ft.sync_read(56, 2, [1, 2]))
            replies = statuses(exchange(link, sync, 16))
            assert [position(p) for p in replies] == [100 - 300, 2048]
            replies = statuses(exchange(link, sync, 16))
            assert [position(p) for p in replies] == [100, 2048]
        assert bus.errors == []


# ---------------------------------------------------------------------- SimBackend


async def test_sim_backend_readings_are_glitched_in_joint_units(clock):
    servos = [
        ServoSpec(1, "XM430-W350", "waist"),
        ServoSpec(2, "XM430-W350", "shoulder", direction=-1, gear_ratio=2.0),
        ServoSpec(3, "XM430-W350", "shoulder", direction=-1, gear_ratio=2.0, shadow_of=2),
    ]
    async with SimBackend(servos, clock=clock) as sim:
        before = (await sim.read()).position
        sim.fault("waist").glitch(0.46, unit="rad", replies=2)
        sim.fault("shoulder").glitch(100)  # shaft ticks, through direction and gearing
        sim.faults(3).glitch(1000, replies=None)  # a shadow's position is never read
        glitched = (await sim.read()).position
        assert glitched[0] == pytest.approx(before[0] + 0.46)
        tick = float(sim.model.quantum[1])
        assert glitched[1] == pytest.approx(before[1] - 100 * tick / 2.0)
        second = (await sim.read()).position
        assert second[0] == pytest.approx(before[0] + 0.46)
        assert second[1] == pytest.approx(before[1])
        assert (await sim.read()).position.tolist() == pytest.approx(before.tolist())
        assert sim.faults(3).glitched == 0


# ---------------------------------------------------------------------- the real backends


@pytest.mark.parametrize("family", ["dynamixel", "feetech"])
async def test_a_glitch_reaches_the_real_backends_reading_as_a_valid_one(family):
    model = "XM430-W350" if family == "dynamixel" else "STS3215"
    servos = [ServoSpec(1, model, "a"), ServoSpec(2, model, "b")]
    runner = running_virtual_bus if family == "dynamixel" else running_feetech_bus
    with runner({1: model, 2: model}, return_delay_time=0) as bus:
        spec = BusSpec(bus.port, 1_000_000, family=family)
        kind = DynamixelBackend if family == "dynamixel" else FeetechBackend
        async with kind(spec, servos, margin_ms=300.0, pipeline=False) as backend:
            before = (await backend.read()).position
            bus.faults(2).glitch(0.46, unit="rad")
            glitched = await backend.read()
            after = (await backend.read()).position
        tick = bus.servo(2).spec.radians_per_tick
        assert glitched.position[1] - before[1] == pytest.approx(0.46, abs=tick)
        assert glitched.position[0] == before[0]
        assert after.tolist() == before.tolist()
        assert glitched.counters.crc_errors == 0  # a valid reply: nothing noticed it
        assert bus.faults(2).glitched == 1
        assert bus.errors == []
