"""Broker loss, the last will, retained targets, floods: the bridge under a flaky network."""

import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import aiomqtt
import pytest

from hilbot import _compat_asyncio as aio
from hilbot.driver.runtime.backends import run_queue_wait
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop import TeleopPublisher

#: The raw-socket flood publisher (a script beside this test).
FLOOD = str(Path(__file__).with_name("flood.py"))

PREFIX = "hilbot/omx"


async def test_broker_killed_and_restarted_holds_reconnects_and_resumes_on_a_fresh_target(
    kit, mosquitto
):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
    ):
        async with TeleopPublisher(mosquitto.url, PREFIX) as pub:
            await pub.command("enable")
            await kit.eventually(lambda: runtime.mode is Mode.ARMED)
            for _ in range(20):
                await pub.joint_target({"joint1": 0.3})
                await asyncio.sleep(0.01)
            await kit.eventually(lambda: not runtime.state().watchdog_tripped)
        mosquitto.stop()
        await kit.eventually(lambda: not bridge.connected.is_set(), what="the bridge noticed")
        # No fresh target: the watchdog trips within its 0.5 s timeout and the arm holds.
        await kit.eventually(lambda: runtime.state().watchdog_tripped, timeout=2.0)
        held = runtime.state().command["joint1"]
        await asyncio.sleep(0.3)
        assert runtime.state().command["joint1"] == pytest.approx(held, abs=1e-9)
        assert runtime.mode is Mode.ARMED

        mosquitto.start()
        # backoff of at most 0.4 s: a few; the deadline is for a busy host
        await kit.eventually(bridge.connected.is_set, timeout=30.0, what="reconnected")
        assert bridge.counters.connects == 2 and bridge.counters.disconnects == 1
        await runtime.wait_cycles(40)
        assert runtime.state().watchdog_tripped  # nothing moves until a fresh target
        assert runtime.state().command["joint1"] == pytest.approx(held, abs=1e-9)
        async with TeleopPublisher(mosquitto.url, PREFIX) as pub:
            deadline = time.monotonic() + 30.0  # not a count of targets: a busy host sends fewer
            while time.monotonic() < deadline:
                await pub.joint_target({"joint1": -0.2})
                await asyncio.sleep(0.01)
                if abs(runtime.state().joints.positions()["joint1"] + 0.2) < 0.01:
                    break
        assert runtime.state().joints.positions()["joint1"] == pytest.approx(-0.2, abs=0.01)


async def test_a_retained_target_is_never_acted_on(kit, mosquitto):
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as old:
        stale = {"seq": 1, "positions": {"joint1": 1.0}}
        await old.publish(f"{PREFIX}/joints/target", json.dumps(stale), retain=True)
        await old.publish(f"{PREFIX}/cmd", json.dumps({"command": "enable"}), qos=1, retain=True)
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
    ):
        await kit.eventually(lambda: bridge.counters.rejected["retained"] == 2)
        await runtime.wait_cycles(20)
        state = runtime.state()
        assert state.mode is Mode.DISARMED
        assert state.command["joint1"] != pytest.approx(1.0, abs=0.05)


async def test_last_will_marks_the_robot_offline_when_the_worker_dies_and_it_restarts(
    kit, mosquitto
):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url, isolate=True) as link,
        aiomqtt.Client("127.0.0.1", mosquitto.port) as client,
    ):
        await client.subscribe(f"{PREFIX}/status", qos=1)
        statuses = []
        async with aio.timeout(30):
            async for message in client.messages:
                statuses.append(json.loads(message.payload)["online"])
                if statuses == [True]:
                    os.kill(link.pid, signal.SIGKILL)  # no goodbye: only the broker's last will
                elif False in statuses and statuses[-1]:
                    break  # the worker was restarted and is back
        assert statuses[0] is True
        assert statuses[statuses.index(False) :] == [False, True]
        assert link.restarts == 1
        # The restarted worker serves again.
        async with TeleopPublisher(mosquitto.url, PREFIX) as pub:
            await pub.command("enable")
            await kit.eventually(lambda: runtime.mode is Mode.ARMED, timeout=10)


async def test_clean_shutdown_publishes_offline(kit, mosquitto):
    async with kit.running_sim(chains=False) as runtime, kit.serving(runtime, mosquitto.url):
        pass
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
        await client.subscribe(f"{PREFIX}/status")
        async with aio.timeout(5):
            message = await anext(aiter(client.messages))
        assert json.loads(message.payload)["online"] is False


def resident(pid):
    """Resident memory of process ``pid`` [bytes]."""
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class LoopWindow:
    """The control loop's rate (per 0.25 s slice), the share of each slice its thread
    waited for a CPU (the host's doing), and this process's CPU time per cycle."""

    SLICE = 0.25  # [s]

    def __init__(self, runtime):
        self._runtime = runtime
        self.rates = []
        self.waits = []
        self.cycles = 0
        self.cpu = 0.0

    async def run(self, seconds):
        # This coroutine runs on the control loop's event loop thread: run_queue_wait()
        # is that thread's time kept from a CPU by the host (never its own work).
        cycles, t = self._runtime.state().stats.cycles, time.monotonic()
        first, cpu, waited = cycles, time.process_time(), run_queue_wait() or 0.0
        for _ in range(round(seconds / self.SLICE)):
            await asyncio.sleep(self.SLICE)
            now, n, w = time.monotonic(), self._runtime.state().stats.cycles, run_queue_wait()
            self.rates.append((n - cycles) / (now - t))
            self.waits.append(((w or 0.0) - waited) / (now - t))
            cycles, t, waited = n, now, w or 0.0
        self.cycles += cycles - first
        self.cpu += time.process_time() - cpu

    @property
    def rate(self):
        """Median slice rate [Hz]: a neighbour's burst on this shared machine stalls a
        slice or two, a flood that slows the loop shifts them all."""
        return statistics.median(self.rates)

    @property
    def waiting(self):
        """Median share of a slice the loop's thread waited for a CPU."""
        return statistics.median(self.waits)

    @property
    def cpu_per_cycle(self):
        return self.cpu / max(self.cycles, 1)


async def test_a_flood_of_10000_targets_per_second_keeps_the_loop_rate_and_memory_flat(
    kit, mosquitto
):
    bursts, burst_s = 4, 1.25
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url, isolate=True) as link,
    ):
        async with TeleopPublisher(mosquitto.url, PREFIX) as pub:
            await pub.command("enable")
            await kit.eventually(lambda: runtime.mode is Mode.ARMED)
        quiet, flooded = LoopWindow(runtime), LoopWindow(runtime)
        nominal = runtime.state().stats.target_rate  # [Hz]
        await quiet.run(1.0)
        # The flood comes from the network: a raw-socket publisher process (it costs almost
        # no CPU) through a broker given low CPU priority, as if it ran on another host. It
        # comes in bursts with pauses as long: the loop rate in each burst is compared with
        # the pauses between them, interleaved, so a neighbour's load on this shared machine
        # falls on both, and the ratio measures the flood.
        os.setpriority(os.PRIO_PROCESS, mosquitto.process.pid, 19)
        flood = await asyncio.create_subprocess_exec(
            sys.executable,
            FLOOD,
            str(mosquitto.port),
            "10000",
            str(burst_s),
            "--bursts",
            str(bursts),
            "--pause",
            str(burst_s),
            "--amplitude",
            "0",  # joint1 stays at home (0): a moving sim arm costs CPU of its own
            stdout=asyncio.subprocess.PIPE,
        )
        received = frames = elapsed = 0.0
        memory = []
        try:
            assert await flood.stdout.readline() == b"flooding\n"
            while True:
                line = (await flood.stdout.readline()).split()
                if line[0] == b"sent":
                    sent = int(line[1])
                    break
                # skip the first 0.25 s of each phase (queues fill or drain), measure 0.75 s
                start = float(line[1]) + 0.25
                if start < time.monotonic():
                    continue  # this test was too slow to catch the phase: skip it
                await asyncio.sleep(start - time.monotonic())
                if line[0] == b"off":
                    await quiet.run(0.75)
                    continue
                counts, t = (link.counters.received, link.target_frames), time.monotonic()
                await flooded.run(0.75)
                received += link.counters.received - counts[0]
                frames += link.target_frames - counts[1]
                elapsed += time.monotonic() - t
                memory.append({pid: resident(pid) for pid in (os.getpid(), link.pid)})
        finally:
            with contextlib.suppress(ProcessLookupError):
                flood.kill()
            await flood.wait()
        await quiet.run(1.0)
        grown = {pid: memory[-1][pid] - rss for pid, rss in memory[0].items()}
        measured = (
            f"loop {quiet.rate:.1f} Hz quiet, {flooded.rate:.1f} Hz in the flood's bursts "
            f"({len(quiet.rates)} and {len(flooded.rates)} slices), its thread waiting for a "
            f"CPU {quiet.waiting:.0%} and {flooded.waiting:.0%} of the time; control process "
            f"CPU per cycle {quiet.cpu_per_cycle * 1e6:.0f} / "
            f"{flooded.cpu_per_cycle * 1e6:.0f} us; "
            f"worker handled {received / elapsed:.0f} msg/s, control process took "
            f"{frames / elapsed:.0f} target frames/s; resident memory from the first burst to "
            f"the last +{grown[os.getpid()] / 1024:.0f} KiB (control), "
            f"+{grown[link.pid] / 1024:.0f} KiB (worker)"
        )
        print(measured)
        assert sent == 10_000 * burst_s * bursts, measured
        assert len(flooded.rates) >= 6 and len(memory) >= 2, measured  # most bursts measured
        assert received > 0, measured  # the flood reached the worker (niced: it may lag)
        # The control process sees at most one batch of targets per millisecond (plus the
        # 100 ms counter reports), however fast they arrive: the worker absorbs the flood.
        assert frames / elapsed <= 1100, measured
        # flat in both processes: bounded queues, conflation, bounded seq table
        assert max(grown.values()) < 1024 * 1024, measured
        state = runtime.state()
        assert state.mode is Mode.ARMED and not state.faults, (measured, state.faults)
        # The loop keeps its rate in the flood, but for what the host takes from it: the
        # cycles lost while its thread waited longer for a CPU in the bursts than in the
        # pauses (measured by the kernel; neighbours' bursts on a busy host, the flood's
        # own processes on 2 cores). Work the flood put on this process is never counted
        # there: it shows as a lower rate at the same wait.
        host_loss = nominal * max(0.0, flooded.waiting - quiet.waiting)
        assert flooded.rate >= 0.9 * quiet.rate - host_loss, measured
        # The CPU time per cycle is printed, not asserted: with the arm still, a profile
        # of the flood shows no new work in this process but the frames above (~30 ms/s),
        # yet the figure grows 10-60 % on this 2-core box, as the flood's processes share
        # the cores (and their caches) with this one.
