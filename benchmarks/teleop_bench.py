"""Teleop latency: MQTT publish -> goal written to the bus, against the plain MQTT round trip.

Runs a real mosquitto on loopback and the OpenManipulator-X at its configured rate,
on the simulated backend and on the virtual Dynamixel bus (real Dynamixel backend).
A publisher in another process (as a teleop client is on another machine) sends
joint targets (small steps the safety layer passes unchanged); a cycle listener
stamps the cycle that writes each one. The
plain MQTT round trip (publish -> a subscriber in this process) is measured in
the same run, as the peer figure. Then a 10,000 targets/s flood checks the loop
rate with the teleop worker process (default) and with the bridge in process.

    python benchmarks/teleop_bench.py [--samples N] [--no-flood] [--no-virtual] [--no-report]

Each latency is also split into stages (delivery to the runtime, wait for the cycle,
the cycle), and an idle event loop's wake-up lag is measured as the machine's own
share of the tails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _broker import free_port, mosquitto
from _report import load_note, write_section

from hilbot.driver.runtime.backends import build_backend
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop import TeleopPublisher, TeleopSettings, serve
from hilbot.driver.teleop.bridge import NO_DELAY

#: The raw-socket flood publisher the load tests use.
FLOOD = str(Path(__file__).resolve().parents[1] / "tests" / "driver" / "teleop" / "flood.py")
PREFIX = "hilbot/omx"
JOINT = "joint1"
STEP = 0.004  # [rad] below the per-cycle max delta: written unchanged


@contextlib.contextmanager
def broker_on_free_port() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A mosquitto broker on a free port: ``(port, process)``."""
    port = free_port()
    with mosquitto(port, kill=True) as process:
        yield port, process


async def cancel_and_wait(task: asyncio.Task, attempts: int = 10) -> None:
    """Cancel and wait, cancelling again if a cancel was lost (Python 3.11 wait_for)."""
    for _ in range(attempts):
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2.0)
        if done:
            with contextlib.suppress(asyncio.CancelledError):
                task.result()
            return
    raise RuntimeError(f"{task.get_name()} ignored {attempts} cancellations")


def stage_table(path: str, stages: list[tuple[float, float, float]]) -> list[str]:
    """One table row of p50 / p99 per stage [ms]; printed as it is made."""
    if not stages:
        return []
    a = np.asarray(stages) * 1e3
    cells = [f"{np.median(a[:, k]):.2f} / {np.percentile(a[:, k], 99):.2f}" for k in range(3)]
    row = f"| {path} | " + " | ".join(cells) + " |"
    print(row, flush=True)
    return [row]


def pct(values: list[float]) -> tuple[float, float, float]:
    a = np.asarray(values) * 1e3
    return float(np.median(a)), float(np.percentile(a, 99)), float(a.max())


async def loop_lag(seconds: float) -> list[float]:
    """How late an idle event loop wakes from a 1 ms sleep [s]: the machine's own stalls."""
    out: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        out.append(time.perf_counter() - t - 0.001)
    return out


async def mqtt_round_trip(port: int, samples: int) -> list[float]:
    """Publish -> receive through mosquitto, both clients in this process [s]."""
    payload = json.dumps({"seq": 1, "positions": {JOINT: 0.1}, "sender": "x" * 12}).encode()
    out: list[float] = []
    async with (
        aiomqtt.Client("127.0.0.1", port, socket_options=NO_DELAY) as sub,
        aiomqtt.Client("127.0.0.1", port, socket_options=NO_DELAY) as pub,
    ):
        await sub.subscribe("bench/rtt")
        messages = aiter(sub.messages)
        for _ in range(samples):
            t = time.perf_counter()
            await pub.publish("bench/rtt", payload)
            await anext(messages)
            out.append(time.perf_counter() - t)
            await asyncio.sleep(0.02)
    return out


async def publish_targets(port: int, base: float, count: int) -> None:
    """The remote publisher (``--publish``): joint targets, then ``[value, t_publish]`` lines.

    It runs in its own process, as a teleop client runs on its own machine: a
    publisher sharing the robot's event loop would add that loop's delays to
    its own sends.
    """
    url = f"mqtt://127.0.0.1:{port}"
    sent: list[tuple[float, float]] = []
    async with TeleopPublisher(url, PREFIX, settings=TeleopSettings(state_rate_hz=20)) as pub:
        for i in range(count):
            value = base + (STEP if i % 2 else -STEP) + 1e-7 * i  # each value unique
            sent.append((value, time.perf_counter()))  # CLOCK_MONOTONIC: same in every process
            await pub.joint_target({JOINT: value})
            await asyncio.sleep(0.03 + 0.01 * (i % 3))  # not phase-locked to the loop
    for value, t in sent:
        print(json.dumps([value, t]), flush=True)


async def teleop_latency(port: int, backend: str, samples: int, isolate: bool) -> dict:
    """Publish joint targets from another process; time until the cycle that writes each [s]."""
    config = load_config("openmanipulator_x")
    settings = TeleopSettings(state_rate_hz=20)
    url = f"mqtt://127.0.0.1:{port}"
    index = config.joint_names.index(JOINT)
    arrived: dict[float, float] = {}  # value -> when the runtime was handed it
    written: dict[float, tuple[float, float]] = {}  # value -> (cycle deadline, cycle end)

    def listener(record) -> None:
        value = float(record.command[index])
        if record.written and value not in written:
            written[value] = (record.deadline, time.perf_counter())

    async with build_backend(config, backend) as bus, Runtime(config, bus) as runtime:
        runtime.add_cycle_listener(listener)
        set_joint_targets = runtime.set_joint_targets

        def stamped(positions, **options) -> None:
            arrived.setdefault(positions.get(JOINT), time.perf_counter())
            set_joint_targets(positions, **options)

        runtime.set_joint_targets = stamped  # the bridge (or the worker link) calls this
        ready = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(runtime, settings, url, robot_name="omx", ready=ready, isolate=isolate)
        )
        await ready
        async with TeleopPublisher(url, PREFIX, settings=settings) as pub:
            await pub.command("enable")
            while runtime.mode is not Mode.ARMED:
                await asyncio.sleep(0.01)
        base = runtime.state().command[JOINT]
        publisher = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--publish",
            f"{port},{base!r},{samples + 10}",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await publisher.communicate()
        await runtime.wait_cycles(10)
        stats = runtime.state().stats
        await cancel_and_wait(task)
    latencies: list[float] = []
    # per sample, the stages [s]: publish -> set_joint_targets called in the control
    # process, -> the deadline of the cycle that wrote it, -> that cycle's end
    stages: list[tuple[float, float, float]] = []
    sent = [json.loads(line) for line in out.decode().splitlines()][10:]  # 10 to warm up
    for value, t_pub in sent:
        match = next((v for v in written if abs(v - value) < 1e-9), None)
        if match is None:
            continue
        deadline, end = written[match]
        t_set = arrived.get(value, float("nan"))
        latencies.append(end - t_pub)
        stages.append((t_set - t_pub, deadline - t_set, end - deadline))
    return {
        "latencies": latencies,
        "stages": stages,
        "missed": len(sent) - len(latencies),
        "rate": stats.rate,
        "period": 1 / config.rate_hz,
    }


async def flood_rates(port: int, broker: subprocess.Popen, isolate: bool) -> tuple[float, float]:
    """Loop rate [Hz] before and during a 10,000 targets/s flood."""
    config = load_config("openmanipulator_x")
    url = f"mqtt://127.0.0.1:{port}"
    async with build_backend(config, "sim") as bus, Runtime(config, bus) as runtime:
        ready = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(runtime, TeleopSettings(), url, robot_name="omx", ready=ready, isolate=isolate)
        )
        await ready
        await runtime.command("enable")

        async def rate(seconds: float) -> float:
            cycles, t = runtime.state().stats.cycles, time.monotonic()
            await asyncio.sleep(seconds)
            return (runtime.state().stats.cycles - cycles) / (time.monotonic() - t)

        await asyncio.sleep(0.5)
        before = await rate(3.0)
        os.setpriority(os.PRIO_PROCESS, broker.pid, 19)  # "another host"
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            FLOOD,
            str(port),
            "10000",
            "6",
            "--amplitude",
            "0.01",
            stdout=asyncio.subprocess.PIPE,
        )
        await child.stdout.readline()
        await asyncio.sleep(1.0)
        during = await rate(3.0)
        await child.wait()
        os.setpriority(os.PRIO_PROCESS, broker.pid, 0)
        await cancel_and_wait(task)
    return before, during


async def main(args: argparse.Namespace) -> None:
    rows, notes, stage_rows = [], [], []
    load = os.getloadavg()
    with broker_on_free_port() as (port, broker):
        p50, p99, worst = pct(await loop_lag(3.0))
        rows.append(
            f"| idle event loop wake-up lag (peer) | — | {p50:.2f} | {p99:.2f} | {worst:.2f} | — |"
        )
        print(rows[-1], flush=True)
        rtt = await mqtt_round_trip(port, args.samples)
        p50, p99, worst = pct(rtt)
        rows.append(
            f"| plain MQTT round trip (peer) | — | {p50:.2f} | {p99:.2f} | {worst:.2f} | — |"
        )
        print(rows[-1], flush=True)
        backends = ["sim"] + ([] if args.no_virtual else ["virtual"])
        for backend in backends:
            # The virtual bus is measured through the worker only: its child process and
            # the bus thread already load this 2-core machine.
            for isolate in (True, False) if backend == "sim" else (True,):
                mode = "worker process" if isolate else "in process"
                try:
                    r = await teleop_latency(port, backend, args.samples, isolate)
                except Exception as exc:  # a backend that fails to start: say so in the table
                    rows.append(f"| publish -> goal written, {backend}, {mode} | failed: {exc} |")
                    print(rows[-1], flush=True)
                    continue
                p50, p99, worst = pct(r["latencies"])
                rows.append(
                    f"| publish -> goal written, {backend}, {mode} | {r['period'] * 1e3:.1f} | "
                    f"{p50:.2f} | {p99:.2f} | {worst:.2f} | {r['missed']} |"
                )
                print(rows[-1], flush=True)
                stage_rows.extend(stage_table(f"{backend}, {mode}", r["stages"]))
        if not args.no_flood:
            for isolate in (True, False):
                before, during = await flood_rates(port, broker, isolate)
                mode = "worker process" if isolate else "in process"
                notes.append(f"| {mode} | {before:.1f} | {during:.1f} | {during / before:.2f} |")
                print(notes[-1], flush=True)
    body = (
        "OpenManipulator-X at its configured 200 Hz (period 5 ms), loopback mosquitto, "
        f"{args.samples} joint targets per row published 30-50 ms apart (not phase-locked "
        "to the loop). Latency: from just before `publish` to the end of the cycle that "
        "wrote that goal (sim) or queued its sync write on the bus thread (virtual bus, "
        "real Dynamixel backend). Target: p99 <= one period + 1 ms = 6 ms. Times in ms. "
        f"{load_note(load[0], os.getloadavg()[0])} On a busy machine the tails measure the "
        "neighbours as much as hilbot.\n\n"
        "| path | period | p50 | p99 | max | missed |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\nThe teleop part of the latency is the p50 difference to the plain round trip; "
        "the rest is waiting for the next cycle (uniform over one period, 2.5 ms on average). "
        "The idle loop's lag is the machine's: a tail there shows in every row. "
        "*missed*: targets superseded by the next one (30-50 ms later) before they were "
        "written, i.e. slower than that; they are not in the percentiles, so the p99 "
        "understates the tail when *missed* is not 0."
    )
    if stage_rows:
        body += (
            "\n\nWhere the time goes, per sample: *delivery* from `publish` to the runtime's "
            "`set_joint_targets` (broker, bridge, and for the worker the hop to the control "
            "process), *wait* from there to the deadline of the cycle that wrote it (negative: it "
            "came while that cycle was reading the bus), *cycle* from that deadline to the "
            "cycle's end. p50 / p99 in ms.\n\n"
            "| path | delivery | wait for the cycle | cycle |\n|---|---|---|---|\n"
            + "\n".join(stage_rows)
        )
    if notes:
        body += (
            "\n\nLoop rate [Hz] before and during a flood of 10,000 joint targets/s "
            "(raw-socket publisher, broker at nice 19 as if on another host):\n\n"
            "| MQTT side | before | during | ratio |\n|---|---|---|---|\n" + "\n".join(notes)
        )
    if args.no_report:
        print(body)
    else:
        write_section("teleop", "Teleop over MQTT: latency and floods", body)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--publish"]:  # the remote publisher, started by teleop_latency
        port, base, count = sys.argv[2].split(",")
        asyncio.run(publish_targets(int(port), float(base), int(count)))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--no-flood", action="store_true")
    parser.add_argument("--no-virtual", action="store_true")
    parser.add_argument(
        "--no-report", action="store_true", help="print the section, leave BENCHMARKS.md alone"
    )
    asyncio.run(main(parser.parse_args()))
