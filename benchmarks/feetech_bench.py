"""Feetech bus benchmark: a 6-servo STS3215 cycle at 1 Mbps on the virtual Feetech bus.

The virtual bus (``hilbot sim-bus --family feetech``) runs in its own process, as a
USB adapter is its own device, and delays each reply by its wire time at 10 bits a
byte. One cycle is a sync read of the 8-byte state block (Present Position, Speed,
Load, Voltage, Temperature: what hilbot reads every cycle) and a sync write of Goal
Position: 14 + 6 x 14 + 26 = 124 bytes, 1.24 ms on the wire, at most 806 cycles/s.

Rows, measured in the same run, interleaved (one round of ``--cycles`` cycles per row,
``--reps`` rounds, medians over rounds):

* hilbot's ``FeetechBus`` (our codec over pyserial, reads blocking in ``select``);
* hilbot's full async ``FeetechBackend.read()`` + ``write()``, SI units and all, plain
  and pipelined (``pipeline=True``: the next read queued before the state is handed over);
* rustypot (PyPI, Rust) ``Sts3215PyController``: the same 8-byte sync read + goal write;
* the vendor SDK (feetech-servo-sdk, ``scservo_sdk``, what LeRobot's ``FeetechMotorsBus``
  runs on): ``GroupSyncRead`` of the same 8 bytes + ``GroupSyncWrite``, stock
  ``PortHandler`` (it polls ``read`` with ``timeout=0`` while it waits);
* the floor: plain blocking pyserial with both packets encoded in advance and the reply
  not decoded, i.e. what the pty and the scheduler allow on this machine.

Usage: python benchmarks/feetech_bench.py [--cycles 300] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import serial

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import load_note, write_section
from _sim_process import sim_bus, sim_cpu

from hilbot.hal.errors import CommTimeout, CrcError
from hilbot.hal.feetech import protocol
from hilbot.hal.feetech.backend import FeetechBackend
from hilbot.hal.feetech.bus import FeetechBus, sync_write_packet
from hilbot.hal.feetech.tables import feetech_budget
from hilbot.hal.mapping import BusSpec, ServoSpec

IDS = list(range(1, 7))
BAUD = 1_000_000
STATE, LENGTH, GOAL = 56, 8, 42
SERVOS = [ServoSpec(i, "STS3215", f"j{i}") for i in IDS]
Run = Callable[[int], None]  # runs n cycles
LOAD: list[float] = []  # 1-minute load average at the start and the end of the run


class Row:
    """One way of running the cycle; ``open()`` yields a function running n cycles."""

    def __init__(self, name: str, open_run: Callable[[Row], Iterator[Run]]) -> None:
        self.name = name
        self.open = contextmanager(lambda: open_run(self))
        self.failures = 0
        self.rates: list[float] = []
        self.cpus: list[float] = []
        self.sims: list[float] = []

    def median(self, values: list[float]) -> float:
        return statistics.median(values)


def measure(rows: list[Row], cycles: int, reps: int) -> None:
    """Every row ``cycles`` cycles per round, ``reps`` rounds, rows interleaved per round."""
    for _ in range(reps):
        for row in rows:
            with row.open() as run:
                run(5)  # warm-up
                w0, c0, s0 = time.perf_counter(), time.process_time(), sim_cpu()
                run(cycles)
                w1, c1, s1 = time.perf_counter(), time.process_time(), sim_cpu()
            row.rates.append(cycles / (w1 - w0))
            row.cpus.append((c1 - c0) / cycles * 1e3)
            row.sims.append((s1 - s0) / cycles * 1e3)


def goals(k: int) -> dict[int, bytes]:
    return {i: (2048 + (k % 50)).to_bytes(2, "little") for i in IDS}


def ours(port: str) -> Callable[[Row], Iterator[Run]]:
    def open_run(row: Row) -> Iterator[Run]:
        bus = FeetechBus(port, BAUD, retries=0, margin_ms=20.0)
        bus.open()

        def run(n: int) -> None:
            for k in range(n):
                try:
                    bus.sync_read(STATE, LENGTH, IDS)
                except (CommTimeout, CrcError):
                    row.failures += 1
                bus.sync_write(GOAL, 2, goals(k))

        try:
            yield run
        finally:
            bus.close()

    return open_run


def backend(port: str, pipeline: bool = False) -> Callable[[Row], Iterator[Run]]:
    names = [s.joint for s in SERVOS]

    def open_run(row: Row) -> Iterator[Run]:
        loop = asyncio.new_event_loop()
        arm = FeetechBackend(
            BusSpec(port, BAUD, family="feetech"), SERVOS, margin_ms=20.0, pipeline=pipeline
        )
        loop.run_until_complete(arm.__aenter__())

        async def cycles(n: int) -> None:
            for _ in range(n):
                try:
                    state = await arm.read()
                except (CommTimeout, CrcError):
                    row.failures += 1
                    continue
                await arm.write(dict(zip(names, state.position.tolist(), strict=True)))

        try:
            yield lambda n: loop.run_until_complete(cycles(n))
        finally:
            arm.torque_off_on_exit = False
            loop.run_until_complete(arm.close())
            loop.close()

    return open_run


def rustypot_run(port: str) -> Callable[[Row], Iterator[Run]]:
    import rustypot

    def open_run(row: Row) -> Iterator[Run]:
        c = rustypot.Sts3215PyController(port, BAUD, 0.02)
        goal = None
        while goal is None:  # its 20 ms timeout can pass on a loaded machine: try again
            try:
                goal = c.sync_read_raw_present_position(IDS)
            except RuntimeError:
                row.failures += 1

        def run(n: int) -> None:
            for _ in range(n):
                try:
                    c.sync_read_raw_data(IDS, STATE, LENGTH)
                except RuntimeError:  # rustypot's timeout
                    row.failures += 1
                c.sync_write_raw_goal_position(IDS, goal)

        try:
            yield run
        finally:
            c.close()

    return open_run


def vendor_sdk(port: str) -> Callable[[Row], Iterator[Run]]:
    import scservo_sdk as scs

    def open_run(row: Row) -> Iterator[Run]:
        handler = scs.PortHandler(port)
        handler.openPort()
        handler.setBaudRate(BAUD)
        packets = scs.PacketHandler(0)
        read = scs.GroupSyncRead(handler, packets, STATE, LENGTH)
        for i in IDS:
            read.addParam(i)
        write = scs.GroupSyncWrite(handler, packets, GOAL, 2)

        def run(n: int) -> None:
            for k in range(n):
                if read.txRxPacket() != scs.COMM_SUCCESS:
                    row.failures += 1
                write.clearParam()
                for i, data in goals(k).items():
                    write.addParam(i, list(data))
                write.txPacket()

        try:
            yield run
        finally:
            handler.closePort()

    return open_run


def floor(port: str) -> Callable[[Row], Iterator[Run]]:
    read = protocol.encode_instruction(protocol.sync_read(STATE, LENGTH, IDS))
    write = sync_write_packet(GOAL, 2, goals(0))
    reply = len(IDS) * (6 + LENGTH)

    def open_run(row: Row) -> Iterator[Run]:
        ser = serial.Serial(port, BAUD, timeout=0.1)

        def run(n: int) -> None:
            for _ in range(n):
                ser.write(read)
                if len(ser.read(reply)) != reply:
                    row.failures += 1
                ser.write(write)

        try:
            yield run
        finally:
            ser.close()

    return open_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    budget = feetech_budget(BusSpec("-", BAUD, family="feetech"), SERVOS)
    limit = budget.max_rate
    LOAD.append(os.getloadavg()[0])
    with sim_bus(IDS, "STS3215", BAUD, family="feetech") as (port, _pid):
        rows = [
            Row("hilbot FeetechBus: sync read 8 B + sync write", ours(port)),
            Row("hilbot FeetechBackend: read() + write()", backend(port)),
            Row("hilbot FeetechBackend pipelined: read() + write()", backend(port, True)),
            Row("rustypot Sts3215: sync read 8 B + sync write", rustypot_run(port)),
            Row("vendor SDK (scservo_sdk): GroupSyncRead 8 B + GroupSyncWrite", vendor_sdk(port)),
            Row("floor: plain pyserial, packets pre-encoded", floor(port)),
        ]
        measure(rows, args.cycles, args.reps)
    LOAD.append(os.getloadavg()[0])
    report(rows, limit, budget.describe(), args)


def report(rows: list[Row], limit: float, budget: str, args: Any) -> None:
    floor_rate = rows[-1].median(rows[-1].rates)
    peers = [r for r in rows if r.name.startswith(("rustypot", "vendor"))]
    best_cpu = min(r.median(r.cpus) for r in peers)
    lines = [
        f"6 STS3215 at {BAUD} bit/s on the virtual Feetech bus (its own process), Return Delay "
        f"0; {args.cycles} cycles x {args.reps} interleaved rounds, medians. "
        f"{load_note(LOAD[0], LOAD[-1])}",
        "",
        "Wire budget:",
        "",
        "```",
        budget,
        "```",
        "",
        "| row | cycles/s | of the wire limit | of the floor | CPU per cycle [ms] "
        "| virtual bus CPU [ms] | failed reads |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        rate, cpu, sim = r.median(r.rates), r.median(r.cpus), r.median(r.sims)
        lines.append(
            f"| {r.name} | {rate:.0f} | {rate / limit:.0%} | {rate / floor_rate:.0%} | "
            f"{cpu:.3f} | {sim:.3f} | {r.failures} |"
        )
    bus, full = rows[0], max(rows[1:3], key=lambda r: r.median(r.rates))
    bus_rate, bus_cpu = bus.median(bus.rates), bus.median(bus.cpus)
    lines += [
        "",
        f"Targets: >= 90 % of the wire limit ({limit:.0f} cycles/s): hilbot's bus "
        f"{bus_rate / limit:.0%}, its backend ({full.name.split(':')[0][7:]}) "
        f"{full.median(full.rates) / limit:.0%}, "
        f"{'met' if bus_rate >= 0.9 * limit else 'not met'}; the floor itself (no codec at "
        f"all) reaches {floor_rate / limit:.0%} on this machine, hilbot's bus "
        f"{bus_rate / floor_rate:.0%} of it. CPU per cycle <= the best peer's "
        f"({best_cpu:.3f} ms): hilbot's bus {bus_cpu:.3f} ms ({bus_cpu / best_cpu:.1f} x), "
        f"its backend {full.median(full.cpus):.3f} ms ({full.median(full.cpus) / best_cpu:.1f} x), "
        f"{'met' if bus_cpu <= best_cpu else 'not met'}.",
    ]
    write_section("feetech-bench", "Feetech bus: 6 x STS3215 at 1 Mbps", "\n".join(lines))


if __name__ == "__main__":
    main()
