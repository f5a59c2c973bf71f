"""The live view's cost to the control loop: a 1 kHz runtime with the view open and closed.

Run: python benchmarks/view_bench.py [--seconds S] [--rounds R] [--no-browser] [--no-report]

The runtime drives the OpenManipulator-X on the in-process simulator at 1 kHz, tracking
a joint sweep, for S seconds per row. Rows, interleaved round by round:

- closed: no view;
- open, no client: ``LiveView`` served (its listener in the loop, its 30 Hz drawing thread);
- open + Chromium: the same with headless Chromium connected and rendering the page
  (software WebGL), unless ``--no-browser``.

Reported per row: the loop's own time per cycle (``cycle_time``: read, IK, safety,
write and the listeners), its p99, the achieved rate and the deadline overruns;
medians over the rounds. The listener's own cost is timed alone too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import load_note, write_section

from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command
from hilbot.driver.view import LiveView
from hilbot.sim.sim_backend import SimBackend

RATE = 1000.0


@contextlib.contextmanager
def browser(url: str | None):
    """Headless Chromium showing ``url`` (software WebGL) while the block runs."""
    chromium = shutil.which("chromium")
    if url is None or chromium is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="hilbot-bench-chromium-") as profile:
        proc = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--use-gl=swiftshader",
                "--enable-unsafe-swiftshader",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",  # keeps the page open instead of exiting
                url,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(3.0)  # page loaded, websocket connected
            yield proc
        finally:
            proc.terminate()
            proc.wait(10)


async def one_row(view_open: bool, seconds: float, use_browser: bool) -> dict[str, float]:
    config = load_config("openmanipulator_x").model_copy(update={"rate_hz": RATE})
    backend = SimBackend(config.servo_specs("main"), initial_positions=dict(config.home))
    times: list[float] = []
    async with Runtime(config, backend) as rt:
        view = LiveView(rt, port=0) if view_open else None
        if view is not None:
            rt.add_cycle_listener(view.listener)
        rt.add_cycle_listener(lambda rec: times.append(rec.cycle_time))
        url = view.url if (view is not None and use_browser) else None
        with browser(url):
            await rt.command(Command.ENABLE)
            start_cycles = rt.stats.cycles
            times.clear()
            start = time.perf_counter()
            while (elapsed := time.perf_counter() - start) < seconds:
                rt.set_joint_targets({"joint1": 0.5 * np.sin(2.0 * elapsed)})
                await asyncio.sleep(0.01)
            cycles = rt.stats.cycles - start_cycles
            frames = view.frames if view is not None else 0
        if view is not None:
            view.close()
        overruns = float(rt.state().stats.overruns)
    arr = np.array(times) * 1e6
    return {
        "p50": float(np.percentile(arr, 50)),
        "p99": float(np.percentile(arr, 99)),
        "rate": cycles / seconds,
        "overruns": overruns,
        "frames_per_s": frames / seconds,
    }


def listener_cost() -> float:
    """[µs] one call of ``LiveView.listener`` on a real cycle record."""
    from hilbot.driver.runtime.safety import Mode
    from hilbot.driver.runtime.state import CycleRecord
    from hilbot.driver.runtime.validation import load_robot
    from hilbot.hal.backend import JointState

    config = load_config("openmanipulator_x")

    class Rt:
        def __init__(self) -> None:
            self.config, self.robot = config, load_robot(config.urdf)
            self.joint_names = config.joint_names

    view = LiveView(Rt(), port=0)
    n = len(config.joint_names)
    state = JointState(
        names=tuple(config.joint_names),
        position=np.zeros(n),
        velocity=np.zeros(n),
        effort=np.zeros(n),
        temperature=np.zeros(n),
        hardware_errors=(),
        timestamp=0.0,
    )
    rec = CycleRecord(mode=Mode.ARMED, state=state, command=np.zeros(n))
    rec.targets["arm"] = np.array([0.2, 0.0, 0.1])
    start = time.perf_counter()
    for _ in range(20000):
        view.listener(rec)
    cost = (time.perf_counter() - start) / 20000 * 1e6
    view.close()
    return cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    names = ["closed", "open, no client"] + ([] if args.no_browser else ["open + Chromium"])
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            rows[name].append(
                asyncio.run(one_row(name != "closed", args.seconds, name == "open + Chromium"))
            )

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[name])

    lines = [
        f"| {name} | {med(name, 'p50'):.0f} µs | {med(name, 'p99'):.0f} µs | "
        f"{med(name, 'rate'):.0f} Hz | {med(name, 'overruns'):.0f} | "
        f"{med(name, 'frames_per_s'):.0f} |"
        for name in names
    ]
    body = f"""{load_note(load, os.getloadavg()[0])} The browser and viser share the cores
with the loop. Medians of {args.rounds} interleaved rounds of {args.seconds:g} s.
The runtime drives the OpenManipulator-X on the in-process simulator at 1 kHz, joint1
tracking a sweep. "open, no client" serves the view (listener in the loop, 30 Hz drawing
thread); "open + Chromium" also has headless Chromium rendering the page with software
WebGL (SwiftShader) on the same two cores, so that row includes the browser's own CPU.

| view | cycle time p50 | cycle time p99 | rate | overruns | view frames/s |
|---|---|---|---|---|---|
{chr(10).join(lines)}

The listener itself (copying the newest cycle into the view's slot) costs
{listener_cost():.1f} µs per cycle; drawing runs at 30 Hz on viser's side of the GIL.
"""
    if args.no_report:
        print(body)
    else:
        write_section("view", "Live view: the loop with the view open and closed", body)


if __name__ == "__main__":
    main()
