"""Leader -> follower latency: the leader's read -> the follower's goal written on its bus.

One process runs what ``hilbot lead koch_v1_1_leader --to koch_v1_1_follower --backend
virtual`` runs: the leader on a virtual Dynamixel bus (the scripted hand waving it, the
real backend reading it at its 200 Hz), publishing joint targets through the follower's
embedded broker (in its teleop worker process, as ``hilbot run`` serves it) to the
follower's runtime at 200 Hz (``--follower sim``: the in-process simulator; ``virtual``:
its own virtual bus). A target is timed from the end of the leader read it came from
(``JointState.timestamp``) to the follower's ``backend.write`` of that same goal (the
wave is slow enough that the safety layer passes each target unchanged, so a write is
matched to its target by value).

The peer, in the same run, rounds interleaved: the plain MQTT hop on the same broker
(a client publishes a payload of the same size at the same rate, another subscribed to
it receives it; monotonic time in this process both ends).

    python benchmarks/lead_bench.py [--seconds 5] [--rounds 3] [--follower sim|virtual]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import Any, Self

import aiomqtt
import numpy as np
from _report import load_note  # benchmarks/ is on sys.path when this script runs

from hilbot.driver.commands.calibrate import demo_ranges
from hilbot.driver.commands.sim_bus import joint_ranges
from hilbot.driver.lead.leader import lead, prepare_leader
from hilbot.driver.lead.mapping import LeadMap
from hilbot.driver.lead.session import follower
from hilbot.driver.runtime.backends import VIRTUAL_MARGIN_MS, build_backend
from hilbot.driver.runtime.config import load_config
from hilbot.driver.teleop.publisher import TeleopPublisher
from hilbot.hal.backend import Backend, JointState
from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.mapping import BusSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.hand import Hand, wave


class RecordingBackend:
    """A backend that notes when each goal is written (then writes it)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.writes: list[tuple[float, dict[str, float]]] = []
        self.recording = False

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.inner.joint_names

    async def __aenter__(self) -> Self:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.inner.__aexit__(t, e, tb)

    async def read(self) -> JointState:
        return await self.inner.read()

    async def write(self, positions: Mapping[str, float]) -> None:
        if self.recording:
            self.writes.append((time.monotonic(), dict(positions)))
        await self.inner.write(positions)

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        await self.inner.set_torque(enabled, joints)

    async def reboot(self, joints: Iterable[str]) -> None:
        await self.inner.reboot(joints)

    async def close(self) -> None:
        await self.inner.close()


def _pct(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values)
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def _match(sent: list[tuple[float, dict[str, float]]], writes: list[Any]) -> list[float]:
    """Latency of each target to the first write of the same goal [s]."""
    out, i = [], 0
    for read_at, target in sent:
        keys = list(target)
        while i < len(writes) and writes[i][0] < read_at:
            i += 1
        for t, goal in writes[i:]:
            if all(abs(goal.get(k, np.inf) - target[k]) < 1e-9 for k in keys):
                out.append(t - read_at)
                break
    return out


@contextlib.asynccontextmanager
async def _leader(config: Any) -> AsyncIterator[tuple[Hand, DynamixelBackend]]:
    specs = config.servo_specs()
    bus = running_virtual_bus(specs, initial_positions=dict(config.home), return_delay_time=0)
    with bus, Hand(bus, specs) as hand:
        backend = DynamixelBackend(BusSpec(bus.port), specs, margin_ms=VIRTUAL_MARGIN_MS)
        async with backend:
            yield hand, backend


async def _lead_round(state: dict[str, Any], seconds: float) -> list[float]:
    sent: list[tuple[float, dict[str, float]]] = []
    recorder: RecordingBackend = state["recorder"]
    recorder.writes.clear()
    recorder.recording = True
    task = asyncio.create_task(
        lead(
            state["lbackend"],
            state["mapping"],
            state["pub"],
            state["rate"],
            on_publish=lambda t, targets: sent.append((t, targets)),
        )
    )
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0.1)
    recorder.recording = False
    return _match(sent, recorder.writes)


async def _hop_round(url: Any, rate: float, seconds: float, size: int) -> list[float]:
    topic = "bench/hop"
    got: list[float] = []
    async with (
        aiomqtt.Client(url.host, url.port) as rx,
        aiomqtt.Client(url.host, url.port) as tx,
    ):
        await rx.subscribe(topic)

        async def receive() -> None:
            async for message in rx.messages:
                if not message.topic.matches(topic):
                    continue  # amqtt also hands this client the retained status
                sent = json.loads(bytes(message.payload))["t"]  # type: ignore[arg-type]
                got.append(time.monotonic() - sent)

        reader = asyncio.create_task(receive())
        end = time.monotonic() + seconds
        pad = "x" * max(size - 40, 0)
        while time.monotonic() < end:
            await tx.publish(topic, json.dumps({"t": time.monotonic(), "pad": pad}))
            await asyncio.sleep(1.0 / rate)
        await asyncio.sleep(0.2)
        reader.cancel()
        (failure,) = await asyncio.gather(reader, return_exceptions=True)
        if not got and not isinstance(failure, asyncio.CancelledError):
            raise RuntimeError(f"the hop received nothing: {failure!r}")
    return got


async def main(args: argparse.Namespace) -> None:
    leader, fconfig = load_config("koch_v1_1_leader"), load_config("koch_v1_1_follower")
    mapping = LeadMap(leader, fconfig)
    ranges = demo_ranges(joint_ranges(leader))
    rows: dict[str, list[tuple[float, float, int]]] = {"lead": [], "hop": []}
    load = os.getloadavg()[0]
    async with build_backend(fconfig, args.follower) as inner:
        recorder = RecordingBackend(inner)
        async with (
            follower(fconfig, recorder) as (runtime, url),
            _leader(leader) as (hand, lbackend),
        ):
            await prepare_leader(lbackend, mapping)
            hand.play(wave(dict(leader.home), ranges, period=6.0, amplitude=0.15))
            prefix = fconfig.teleop.topic_prefix(fconfig.name)
            async with TeleopPublisher(url, prefix, settings=fconfig.teleop) as pub:
                state = {
                    "recorder": recorder,
                    "lbackend": lbackend,
                    "mapping": mapping,
                    "pub": pub,
                    "rate": leader.rate_hz,
                }
                await _lead_round(state, 1.0)  # warm-up: the follower reaches the wave
                size = len(json.dumps({"seq": 1, "positions": mapping(dict(leader.home))}))
                for _ in range(args.rounds):
                    for name in ("lead", "hop"):
                        if name == "lead":
                            lat = await _lead_round(state, args.seconds)
                        else:
                            lat = await _hop_round(url, leader.rate_hz, args.seconds, size + 80)
                        p50, p99 = _pct(lat)
                        rows[name].append((p50, p99, len(lat)))
                        print(f"{name}: p50 {p50 * 1e3:.2f} ms p99 {p99 * 1e3:.2f} ms n={len(lat)}")
            mode = runtime.state().mode.value
    _report(args, rows, fconfig.rate_hz, mode, load)


def _report(
    args: argparse.Namespace, rows: dict[str, Any], rate: float, mode: str, load: float
) -> None:
    def med(name: str, k: int) -> float:
        return float(np.median([r[k] for r in rows[name]]))

    period = 1e3 / rate
    lead50, lead99 = med("lead", 0) * 1e3, med("lead", 1) * 1e3
    hop50, hop99 = med("hop", 0) * 1e3, med("hop", 1) * 1e3
    target = 2 * period + hop99
    git = ["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"]
    commit = subprocess.run(git, capture_output=True, text=True).stdout.strip()
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    options = f"--seconds {args.seconds:g} --rounds {args.rounds} --follower {args.follower}"
    verdict = "met" if lead99 <= target else "not met"
    lines = [
        f"- command: `python benchmarks/lead_bench.py {options}`",
        f"- machine: {machine}, Python {platform.python_version()}",
        f"- commit: {commit}",
        "",
        f"Medians over {args.rounds} interleaved rounds of {args.seconds:g} s; follower "
        f"{args.follower} at {rate:g} Hz (period {period:.1f} ms), ended {mode}. "
        + load_note(load, os.getloadavg()[0]),
        "",
        "| path | p50 | p99 | samples per round |",
        "|---|---|---|---|",
        f"| leader read -> follower goal written | {lead50:.2f} ms | {lead99:.2f} ms "
        f"| {int(med('lead', 2))} |",
        f"| peer: plain MQTT hop, same broker | {hop50:.2f} ms | {hop99:.2f} ms "
        f"| {int(med('hop', 2))} |",
        "",
        f"Target p99 <= two follower periods + the hop's p99 = {target:.2f} ms: {verdict}.",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--follower", choices=("sim", "virtual"), default="sim")
    asyncio.run(main(parser.parse_args()))
