"""Bus cycle against rustypot as the servo count grows (2.0), and on 6 AX-12A (1.0).

The virtual bus (``hilbot sim-bus``) runs in its own process and delays every reply by
its wire time at 10 bits a byte, Return Delay Time 0, 1 Mbps. Each row is one client
doing read + write cycles: read every servo, write every servo's goal position:

* hilbot backend, plain (``pipeline=False``): ``await read()`` then ``await write(goals)``;
* hilbot backend, default (``pipeline="auto"``): the same calls with the backend's default
  settings, as ``hilbot run`` drives them;
* rustypot (PyPI, Rust): ``sync_read_*`` / ``sync_write_goal_position`` of its controller
  for the model, with fast sync read on (2.0);
* floor, asyncio (2.0): what a Python event loop itself costs, with no codec at all: the
  fast sync read and the goal write encoded in advance, written with ``os.write`` on the
  non-blocking port, the reply collected by an ``add_reader`` callback that completes a
  future once all its bytes are in, and not decoded (not a client: a measure of the I/O
  floor that a backend doing its bus I/O on the event loop would start from).

Both read sets are measured: the backend's default for the protocol and position only
(what rustypot reads). Rows run interleaved: one round of ``--cycles`` cycles per row in
turn, ``--reps`` rounds; the figures are medians over rounds. CPU is this process's CPU
time (all threads) per cycle; the virtual bus's is not included.

Usage: python benchmarks/bus_growth_bench.py [--cycles 300] [--reps 5] [--counts 6,12,18,36]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import rustypot
import serial

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import load_note, write_section
from _sim_process import process_cpu, raise_priority, scheduling, sim_bus

from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.dynamixel.protocol import Instruction, InstructionPacket, encode_instruction
from hilbot.hal.dynamixel.tables import RegisterName, model
from hilbot.hal.dynamixel.timing import (
    ReadSet,
    budget_for_lengths,
    choose_read_method,
    cycle_registers,
    default_read_set,
)
from hilbot.hal.errors import CommTimeout, CrcError, HalError
from hilbot.hal.mapping import BusSpec, ServoSpec

BAUD = 1_000_000


def wire_limit(model_name: str, n: int, read: ReadSet, fast: bool) -> float:
    """Wire-limited cycle rate [Hz] of reading ``read`` from n servos + one goal sync write."""
    m = model(model_name)
    method = choose_read_method([m] * n, fast_ok=fast, read=read)
    return budget_for_lengths(
        lengths=[m.span(cycle_registers(m, read))[1]] * n,
        write_length=m.register(RegisterName.GOAL_POSITION).size,
        baudrate=BAUD,
        protocol=m.protocol,
        method=method,
    ).max_rate


@dataclass
class Row:
    """One client; ``run(cycles)`` does that many cycles: ``(wall, CPU)`` time of them [s]."""

    name: str
    limit: float
    run: Callable[[int], tuple[float, float]]
    rates: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    failures: int = 0
    lost: int = 0  # rounds that could not start or ended in an error

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus) if self.cpus else float("nan")


def hilbot_row(
    port: str, specs: list[ServoSpec], protocol: int, pipeline: object, read: ReadSet
) -> Callable[[Row], Callable[[int], tuple[float, float]]]:
    names = [s.joint for s in specs]

    def make(row: Row) -> Callable[[int], tuple[float, float]]:
        async def rounds(cycles: int) -> tuple[float, float]:
            async with DynamixelBackend(
                BusSpec(port, BAUD, protocol), specs, margin_ms=20.0, pipeline=pipeline, read=read
            ) as arm:  # type: ignore[arg-type]
                state = await arm.read()
                goals = dict(zip(names, state.position.tolist(), strict=True))
                t, c = time.perf_counter(), time.process_time()
                for _ in range(cycles):
                    try:
                        state = await arm.read()
                    except (CommTimeout, CrcError):
                        row.failures += 1
                        continue
                    goals = dict(zip(names, state.position.tolist(), strict=True))
                    await arm.write(goals)
                return time.perf_counter() - t, time.process_time() - c

        return lambda cycles: asyncio.run(rounds(cycles))

    return make


def rustypot_row(
    port: str, ids: list[int], model_name: str, length: int, address: int
) -> Callable[[Row], Callable[[int], tuple[float, float]]]:
    def make(row: Row) -> Callable[[int], tuple[float, float]]:
        def run(cycles: int) -> tuple[float, float]:
            if model_name.startswith("AX"):
                # an AX has no sync read: rustypot reads each servo, as hilbot does
                c = rustypot.AxPyController(port, BAUD, 0.02)
                read = lambda: [c.read_present_position(i) for i in ids]  # noqa: E731
                pos = [c.read_present_position(i)[0] for i in ids]
                write = lambda: c.sync_write_goal_position(ids, pos)  # noqa: E731
            else:
                c = rustypot.Xl430PyController(port, BAUD, 0.02)
                c.set_fast_sync_read(True)
                if length == 4:
                    read = lambda: c.sync_read_present_position(ids)  # noqa: E731
                else:
                    read = lambda: c.sync_read_raw_data(ids, address, length)  # noqa: E731
                goal = c.sync_read_present_position(ids)
                write = lambda: c.sync_write_goal_position(ids, goal)  # noqa: E731
            try:
                t, cpu = time.perf_counter(), time.process_time()
                for _ in range(cycles):
                    try:
                        read()
                    except Exception:  # rustypot raises its own errors on a timeout
                        row.failures += 1
                    write()
                return time.perf_counter() - t, time.process_time() - cpu
            finally:
                with suppress(Exception):
                    c.close()

        return run

    return make


def inline_floor_row(
    port: str, ids: list[int], address: int, length: int, goal: int
) -> Callable[[Row], Callable[[int], tuple[float, float]]]:
    """The asyncio I/O floor: pre-encoded packets, replies awaited through ``add_reader``."""
    read_packet = encode_instruction(
        InstructionPacket(
            2, 0xFE, Instruction.FAST_SYNC_READ, struct.pack("<HH", address, length) + bytes(ids)
        )
    )
    # fast sync read reply: an 8-byte header (instruction 0x55), then per servo error, id,
    # data and CRC (the last CRC is the packet's)
    expected = 8 + len(ids) * (length + 4)

    def make(row: Row) -> Callable[[int], tuple[float, float]]:
        async def rounds(cycles: int) -> tuple[float, float]:
            loop = asyncio.get_running_loop()
            with serial.Serial(port, BAUD, timeout=0.05) as ser:
                fd = ser.fileno()
                os.set_blocking(fd, False)
                buf = bytearray()
                waiting: list[asyncio.Future[None]] = []

                def on_readable() -> None:
                    with suppress(BlockingIOError):
                        buf.extend(os.read(fd, 4096))
                    if len(buf) >= expected and waiting and not waiting[0].done():
                        waiting[0].set_result(None)

                async def transact(packet: bytes) -> bytes:
                    buf.clear()
                    waiting[:] = [loop.create_future()]
                    os.write(fd, packet)
                    async with asyncio.timeout(0.02):
                        await waiting[0]
                    return bytes(buf)

                loop.add_reader(fd, on_readable)
                try:
                    first = await transact(read_packet)
                    data = first[10:]  # the first servo's data, after its error and id bytes
                    position = int.from_bytes(data[goal : goal + 4], "little", signed=True)
                    params = struct.pack("<HH", 116, 4) + b"".join(
                        struct.pack("<Bi", i, position) for i in ids
                    )
                    write_packet = encode_instruction(
                        InstructionPacket(2, 0xFE, Instruction.SYNC_WRITE, params)
                    )
                    t, c = time.perf_counter(), time.process_time()
                    for _ in range(cycles):
                        try:
                            await transact(read_packet)
                        except TimeoutError:
                            row.failures += 1
                        os.write(fd, write_packet)
                    return time.perf_counter() - t, time.process_time() - c
                finally:
                    loop.remove_reader(fd)

        return lambda cycles: asyncio.run(rounds(cycles))

    return make


def measure(rows: list[Row], cycles: int, reps: int, sim_pid: int) -> dict[str, float]:
    """Interleaved rounds; returns each row's median virtual-bus CPU per cycle [ms]."""
    sims: dict[str, list[float]] = {r.name: [] for r in rows}
    for _ in range(reps):
        for row in rows:
            s0 = process_cpu(sim_pid)
            try:
                wall, cpu = row.run(cycles)
            except (HalError, RuntimeError) as exc:  # the loaded machine stalled the bus
                print(f"{row.name}: round lost: {exc}", file=sys.stderr)
                row.lost += 1
                time.sleep(0.5)
                continue
            s1 = process_cpu(sim_pid)
            row.rates.append(cycles / wall)
            row.cpus.append(cpu / cycles * 1e3)
            sims[row.name].append((s1 - s0) / cycles * 1e3)  # includes the row's start-up
    return {k: statistics.median(v) if v else float("nan") for k, v in sims.items()}


def rows_for(port: str, n: int, model_name: str, protocol: int) -> list[Row]:
    ids = list(range(1, n + 1))
    specs = [ServoSpec(i, model_name, f"j{i}") for i in ids]
    default = default_read_set(protocol)
    fast = protocol == 2
    m = model(model_name)
    out: list[tuple[str, float, Callable[[Row], Callable[[int], tuple[float, float]]]]] = []
    # 2.0: the default (all three) and rustypot's position; 1.0: the default (position)
    # and all three (what the backend read before, less voltage and temperature)
    sets = [default, ReadSet.POSITION] if protocol == 2 else [default, ReadSet.FULL]
    for read in sets:
        span = m.span(cycle_registers(m, read))
        limit = wire_limit(model_name, n, read, fast)
        label = f"{read.value} ({span[1]} B)"
        out.append(
            (
                f"hilbot backend, plain, {label}",
                limit,
                hilbot_row(port, specs, protocol, False, read),
            )
        )
        out.append(
            (
                f'hilbot backend, default (pipeline="auto"), {label}',
                limit,
                hilbot_row(port, specs, protocol, "auto", read),
            )
        )
        if protocol == 1 and read is not ReadSet.POSITION:
            continue  # rustypot's AX controller reads one register per call
        out.append(
            (
                f"rustypot {rustypot_version()}, {label}",
                limit,
                rustypot_row(port, ids, model_name, span[1], span[0]),
            )
        )
        if protocol == 2:
            position = m.register(RegisterName.PRESENT_POSITION).address - span[0]
            out.append(
                (
                    f"floor, asyncio I/O, no codec, {label}",
                    limit,
                    inline_floor_row(port, ids, span[0], span[1], position),
                )
            )
    rows = []
    for name, limit, make in out:
        row = Row(name, limit, lambda cycles: (0.0, 0.0))
        row.run = make(row)
        rows.append(row)
    return rows


def rustypot_version() -> str:
    from importlib.metadata import version

    return version("rustypot")


def table(rows: list[Row], sims: dict[str, float], n: int | None = None) -> list[str]:
    peer = {r.name.split(", ", 1)[1]: r for r in rows if r.name.startswith("rustypot")}
    lines = []
    for r in rows:
        read = r.name.rsplit(", ", 1)[1]
        ref = next((p for k, p in peer.items() if k.endswith(read)), None)
        vs = f"{r.cpu / ref.cpu:.1f} x" if ref is not None and ref is not r else "-"
        count = f"{n} | " if n is not None else ""
        lines.append(
            f"| {count}{r.name} | {r.rate:.0f} | {r.rate / r.limit * 100:.0f} % of {r.limit:.0f} | "
            f"{r.cpu:.3f} | {vs} | {sims[r.name]:.2f} | {r.failures} / {r.lost} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--counts", default="6,12,18,36")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    parser.add_argument("--skip-p1", action="store_true")
    args = parser.parse_args()
    raise_priority("fifo")
    load = os.getloadavg()
    counts = [int(c) for c in args.counts.split(",") if c]
    head = (
        "| servos | row | rate [Hz] | vs wire limit | CPU/cycle [ms] | CPU vs rustypot "
        "| bus sim CPU/cycle [ms] | failed reads / lost rounds |\n|---|---|---|---|---|---|---|---|"
    )
    growth = []
    for n in counts:
        with sim_bus(range(1, n + 1), "XM430-W350", BAUD, sched="fifo") as (port, pid):
            rows = rows_for(port, n, "XM430-W350", 2)
            sims = measure(rows, args.cycles, args.reps, pid)
        growth += table(rows, sims, n)
        print("\n".join(growth[-len(rows) :]), flush=True)
    load_end = os.getloadavg()
    common = (
        f"Medians of {args.reps} interleaved rounds of {args.cycles} cycles per row; both "
        f"processes at {scheduling()}. {load_note(load[0], load_end[0])} "
        "The virtual bus runs in its own process (`hilbot sim-bus`, Return "
        "Delay Time 0, 1 Mbps) and answers each instruction when its last byte would arrive "
        "on a real wire. Wire limit: the read (fast sync read on 2.0, one read per servo on "
        "an AX) of the row's bytes plus one goal sync write, at 10 bits a byte. CPU: this "
        "process, all threads, over the measured cycles; the virtual bus's includes each "
        "row's start-up; "
        "'CPU vs rustypot' compares rows of the same read set. The asyncio floor row is no "
        "client: both packets encoded in advance, each reply awaited through the event loop's "
        "add_reader and not decoded; it is the CPU a backend doing its bus I/O on the event "
        "loop would start from, before any decoding, unit conversion or safety check."
    )
    body = f"""{common}

**Protocol 2.0, XM430-W350, growth with the servo count:**

{head}
{chr(10).join(growth)}
"""
    if not args.skip_p1:
        with sim_bus(range(1, 7), "AX-12A", BAUD, protocol=1, sched="fifo") as (port, pid):
            rows = rows_for(port, 6, "AX-12A", 1)
            sims = measure(rows, args.cycles, args.reps, pid)
        p1 = table(rows, sims, 6)
        print("\n".join(p1), flush=True)
        body += f"""
**Protocol 1.0, 6 x AX-12A** (no group read on an AX: one read per servo, each a round
trip; the backend's default read set on 1.0 is position only, 2 bytes a servo where it
read 8 before):

{head}
{chr(10).join(p1)}
"""
    if args.no_write:
        print(body)
    else:
        write_section("bus_growth", "Dynamixel bus cycle vs rustypot: growth, Protocol 1.0", body)


if __name__ == "__main__":
    main()
