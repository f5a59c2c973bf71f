"""MuJoCo costs: the backend's cost per cycle, and the virtual bus with physics vs without.

Run: python benchmarks/mujoco_bench.py [--cycles N] [--rounds R] [--seconds S] [--no-report]

1. In process, fake clock advanced 1 ms per cycle (a 1 kHz loop: one body step per
   cycle): one ``await read()`` + ``await write()`` of ``SimBackend`` and of
   ``MujocoBackend``, for the 5-servo OpenManipulator-X and the 12-servo bimanual rig.
   Rows interleaved round by round; medians of the rounds.
2. Over the wire: ``hilbot sim-bus openmanipulator_x`` in its own process at 1 Mbps
   (Return Delay Time 0), with and without ``--physics mujoco``, driven by the real
   ``DynamixelBackend`` (sync read + sync write per cycle, as fast as it goes).
   Interleaved rounds; the cycle rate's median.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import load_note, write_section

from hilbot.driver.runtime.backends import (
    dynamixel_backend,
    mujoco_backend,
    sim_backend,
    virtual_buses,
)
from hilbot.driver.runtime.config import load_config
from hilbot.hal.errors import HalError


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


async def cycle_cost(config, kind: str, cycles: int) -> float:
    """Median-free mean cost [µs] of read + write per 1 ms cycle (after a warm-up)."""
    clock = Clock()
    build = mujoco_backend if kind == "mujoco" else sim_backend
    backend = build(config, clock=clock)
    names = list(config.home)
    async with backend:
        await backend.set_torque(True)
        goal = dict(config.home)
        for k in range(cycles + 100):
            if k == 100:
                start = time.perf_counter()
            clock.t += 1e-3
            await backend.read()
            goal[names[0]] = 0.3 * np.sin(k * 1e-3 * 2 * np.pi)  # keep it moving
            await backend.write(goal)
    return (time.perf_counter() - start) / cycles * 1e6


async def wire_rate(config, physics: bool, seconds: float) -> float:
    """Cycles per second of the real backend against ``hilbot sim-bus`` (child process)."""
    extra = ("--physics", "mujoco") if physics else ()
    async with virtual_buses(config, return_delay_time=0, extra_args=extra) as ports:
        backend = dynamixel_backend(config, ports, margin_ms=50.0)
        async with backend:
            await backend.set_torque(True)
            goal = dict(config.home)
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                try:
                    await backend.read()
                    await backend.write(goal)
                except HalError:  # a reply the loaded machine made late: not a cycle
                    continue
                n += 1
            return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    robots = {"openmanipulator_x (5 servos)": "openmanipulator_x", "bimanual (12)": "bimanual"}
    configs = {label: load_config(name) for label, name in robots.items()}
    costs: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for label, config in configs.items():
            for kind in ("sim", "mujoco"):
                cost = asyncio.run(cycle_cost(config, kind, args.cycles))
                costs.setdefault((label, kind), []).append(cost)
    rows = []
    for label in configs:
        sim = statistics.median(costs[(label, "sim")])
        muj = statistics.median(costs[(label, "mujoco")])
        rows.append(
            f"| {label} | {sim:.0f} µs | {muj:.0f} µs | {muj / sim:.1f}x | {muj / 10:.1f} % |"
        )
    omx = configs["openmanipulator_x (5 servos)"]
    rates: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(3):
        for physics in (False, True):
            rates[physics].append(asyncio.run(wire_rate(omx, physics, args.seconds)))
    plain, phys = statistics.median(rates[False]), statistics.median(rates[True])
    body = f"""Figures are medians of interleaved rounds. {load_note(load, os.getloadavg()[0])}

**Backend cost per cycle** (in process, fake clock 1 ms per cycle = one 1 ms body step;
`await read()` + `await write()`, joint1 moving), median of {args.rounds} rounds of
{args.cycles} cycles:

| robot | SimBackend | MujocoBackend | ratio | of a 1 kHz cycle |
|---|---|---|---|---|
{chr(10).join(rows)}

**Virtual bus with physics** (`hilbot sim-bus openmanipulator_x` in its own process,
1 Mbps, Return Delay Time 0, the real `DynamixelBackend` doing sync read + sync write
back to back for {args.seconds:g} s), median of 3 interleaved rounds:

| bus | cycles/s |
|---|---|
| plain virtual bus | {plain:.0f} |
| `--physics mujoco` | {phys:.0f} |
| ratio | {phys / plain:.2f} |

The body is stepped in the bus process between packets, in whole 1 ms steps; the
wire, not the physics, sets the rate when the ratio is near 1.
"""
    if args.no_report:
        print(body)
    else:
        write_section("mujoco", "MuJoCo: backend cost per cycle, virtual bus with physics", body)


if __name__ == "__main__":
    main()
