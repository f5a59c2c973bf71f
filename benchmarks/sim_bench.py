"""Simulator costs: SimBackend read/write, and the virtual bus against the wire limit.

Run: python benchmarks/sim_bench.py [--cycles N] [--no-report]

1. SimBackend (in process): the cost of one ``await read()`` + ``await write()`` of a
   6-joint arm, holding still and moving, next to a trivial numpy call measured in the
   same run (load from other processes moves both; the ratio is the portable figure).
2. Virtual bus (``hilbot sim-bus`` in its own process, 6 x XM430-W350, 1 Mbps, Return
   Delay Time 0): a minimal blocking pyserial client sends a 4-byte sync read plus a
   sync write of 6 goals per cycle. Reported: the cycle rate against the wire limit,
   the bus server's CPU per cycle (from /proc), and how late a transaction ends
   compared with its wire time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import timeit
from pathlib import Path

import numpy as np
import serial

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import load_note, write_section
from _sim_process import process_cpu, sim_bus

from hilbot.hal.dynamixel.protocol import (
    Instruction,
    InstructionPacket,
    encode_instruction,
    sync_read_params,
    sync_write_params,
)
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.sim_backend import SimBackend

IDS = [1, 2, 3, 4, 5, 6]
BAUD = 1_000_000
BYTE = 10 / BAUD  # [s] per byte, 8N1


def _run(coro_fn) -> None:
    coro = coro_fn()
    try:
        coro.send(None)
    except StopIteration:
        return
    raise RuntimeError("SimBackend awaited something; it should not")


def bench_sim_backend(cycles: int) -> dict[str, float]:
    servos = [ServoSpec(i, "XM430-W350", f"j{i}") for i in IDS]
    now = [0.0]

    def armed() -> SimBackend:
        sim = SimBackend(servos, clock=lambda: now[0])
        asyncio.run(sim.__aenter__())
        _run(lambda: sim.set_torque(True))
        return sim

    still, moving = armed(), armed()  # separate arms: one never moves, one always does
    hold = {f"j{i}": 0.0 for i in IDS}

    def cycle_hold() -> None:
        now[0] += 0.002
        _run(still.read)
        _run(lambda: still.write(hold))

    phase = [0.0]

    def cycle_move() -> None:
        now[0] += 0.002
        phase[0] += 0.002
        _run(moving.read)
        _run(lambda: moving.write({f"j{i}": 0.5 * np.sin(phase[0] + i) for i in IDS}))

    cases = {"noop": lambda: np.zeros(6).any(), "hold": cycle_hold, "move": cycle_move}
    times: dict[str, list[float]] = {name: [] for name in cases}
    ratios: dict[str, list[float]] = {name: [] for name in cases}
    # Interleaved, so that each case's ratio to the no-op compares the same moment of a
    # machine whose load changes by the second.
    for _ in range(9):
        row = {name: timeit.timeit(fn, number=cycles) / cycles for name, fn in cases.items()}
        for name, value in row.items():
            times[name].append(value * 1e6)
            ratios[name].append(value / row["noop"])
    out = {name: statistics.median(values) for name, values in times.items()}
    out |= {f"{name}_ratio": statistics.median(values) for name, values in ratios.items()}
    return out


def bench_virtual_bus(cycles: int) -> dict[str, float]:
    with sim_bus(IDS, "XM430-W350", BAUD) as (port_path, pid):
        port = serial.Serial(port_path, BAUD, timeout=0.1)
        read = encode_instruction(
            InstructionPacket(2, 0xFE, Instruction.SYNC_READ, sync_read_params(132, 4, IDS))
        )
        goals = {i: (2048).to_bytes(4, "little") for i in IDS}
        write = encode_instruction(
            InstructionPacket(2, 0xFE, Instruction.SYNC_WRITE, sync_write_params(2, 116, 4, goals))
        )
        reply_size = len(IDS) * (11 + 4)
        wire_read = (len(read) + reply_size) * BYTE
        wire_cycle = wire_read + len(write) * BYTE
        late, cycle_times, failures = [], [], 0
        for _ in range(20):  # warm up, in the same rhythm as the measured cycles
            port.write(read)
            port.read(reply_size)
            port.write(write)
        cpu0, t0 = process_cpu(pid), time.perf_counter()
        for _ in range(cycles):
            start = time.perf_counter()
            port.write(read)
            data = port.read(reply_size)
            end = time.perf_counter()
            port.write(write)
            if len(data) != reply_size:
                failures += 1
            # the previous cycle's sync write was still on the wire when the read went out
            late.append(end - start - wire_cycle)
            cycle_times.append(time.perf_counter() - start)
        wall = time.perf_counter() - t0
        cpu = process_cpu(pid) - cpu0
        port.close()
    return {
        "wire_cycle_ms": wire_cycle * 1e3,
        "wire_rate": 1 / wire_cycle,
        "rate": cycles / wall,
        "cycle_ms": statistics.median(cycle_times) * 1e3,
        "late_ms": statistics.median(late) * 1e3,
        "late_p90_ms": float(np.percentile(late, 90)) * 1e3,
        "server_cpu_ms": cpu / cycles * 1e3,
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    sim = bench_sim_backend(300)
    bus = [bench_virtual_bus(args.cycles) for _ in range(3)]
    med = {k: statistics.median(b[k] for b in bus) for k in bus[0]}
    wire = f"{med['wire_cycle_ms']:.2f} ms -> {med['wire_rate']:.0f} Hz"
    rate = f"{med['rate']:.0f} Hz ({100 * med['rate'] / med['wire_rate']:.0f} % of the wire limit)"
    late = f"{med['late_ms']:.3f} ms median, {med['late_p90_ms']:.3f} ms p90"
    body = f"""Medians. {load_note(load, os.getloadavg()[0])} The numpy no-op gives
the scale of this machine's slowness at the time (about 0.5-1 µs on an idle one).

**SimBackend** (in process, 6 x XM430-W350, one `read()` + one `write()` of all joints,
2 ms of fake clock per cycle), medians of 9 interleaved runs of 300 cycles:

| case | µs per cycle | in numpy no-ops |
|---|---|---|
| numpy `np.zeros(6).any()` (scale) | {sim["noop"]:.2f} | 1 |
| holding still (model at rest: cached) | {sim["hold"]:.1f} | {sim["hold_ratio"]:.0f} |
| tracking a moving target (1 sub-step per cycle) | {sim["move"]:.1f} | {sim["move_ratio"]:.0f} |

**Virtual bus** (`hilbot sim-bus` in its own process, 6 x XM430-W350, 1 Mbps, Return
Delay Time 0; a blocking pyserial client sends a 4-byte sync read and a sync write of 6
goals per cycle), median of 3 runs of {args.cycles} cycles:

| figure | value |
|---|---|
| wire time of one cycle (sync read 20 + 90 B, sync write 44 B) | {wire} |
| cycle rate measured | {rate} |
| sync read: reply complete after its wire time (behind the sync write before it) + | {late} |
| bus server CPU per cycle | {med["server_cpu_ms"]:.3f} ms |
| short replies (timeouts) | {med["failures"]:.0f} |

The bus never answers early: a transaction ends no sooner than its bytes would take on
the wire (the sleep-then-spin wait learns the scheduler's wake-up slack). What it adds
on top is the server's own reaction time, which grows with the machine's load; the client's deadline
should allow for it (`DynamixelBackend(margin_ms=...)` in the tests).
"""
    if args.no_report:
        print(body)
    else:
        write_section("sim", "Simulator: SimBackend cost, virtual bus vs the wire", body)


if __name__ == "__main__":
    main()
