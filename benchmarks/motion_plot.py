"""The README's picture: the command for a 30 Hz target stream, without and with the motion layer.

The OpenManipulator-X on the simulated backend at 500 Hz, in simulated time (the same
picture on any machine), fed joint1 targets at 30 Hz with ±5 ms jitter: first with
``motion.planner: off`` (each target handed to the safety layer as it comes), then with the
motion layer (the default).

    python benchmarks/motion_plot.py [--out docs/img/motion.png]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from motion_bench import planner_config

from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command
from hilbot.driver.runtime.ticker import ManualClock

RATE = 500.0


def hand(t: float) -> float:
    return 0.35 * np.sin(2 * np.pi * 0.8 * t) + 0.1 * np.sin(2 * np.pi * 0.3 * t)


async def run(planner: str) -> tuple[np.ndarray, np.ndarray, list[tuple[float, float]]]:
    config = planner_config(planner, RATE)
    clock = ManualClock(0.0)
    times: list[float] = []
    values: list[float] = []
    targets: list[tuple[float, float]] = []
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        await rt.command(Command.ENABLE)
        start = rt.state().command["joint1"]
        rt.add_cycle_listener(
            lambda r: (times.append(r.deadline), values.append(float(r.command[0])))
        )
        rng = np.random.default_rng(2)
        t0 = clock()
        for k in range(int(1.6 * 30)):
            sample = k / 30
            send = t0 + sample + rng.uniform(-0.005, 0.005)
            while clock() < send:
                await rt.wait_cycles(1)
            rt.set_joint_targets({"joint1": start + hand(sample)})
            targets.append((clock() - t0, start + hand(sample)))
        await rt.wait_cycles(20)
    return np.array(times) - t0, np.array(values), targets


async def main(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=110)
    for planner, label, style in (
        ("off", "before: each target as it comes", "-"),
        ("stream", "after: the motion layer", "-"),
    ):
        t, q, targets = await run(planner)
        keep = (t > 0.8) & (t < 1.45)
        ax.plot(t[keep], q[keep], style, lw=1.6, label=label)
    tt, qt = zip(*[(a, b) for a, b in targets if 0.8 < a < 1.45], strict=True)
    ax.plot(tt, qt, "k.", ms=6, label="30 Hz targets (±5 ms)")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("joint1 command [rad]")
    ax.set_title("OpenManipulator-X at 500 Hz, joint targets at 30 Hz", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img/motion.png"))
    asyncio.run(main(parser.parse_args().out))
