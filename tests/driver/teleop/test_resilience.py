"""Broker loss, the last will, retained targets, floods: the bridge under a flaky network."""

import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import time

import aiomqtt
import pytest

from hilbot.driver.safety import Mode
from hilbot.driver.teleop import TeleopPublisher

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
        await kit.eventually(bridge.connected.is_set, timeout=5.0, what="reconnected")
        assert bridge.counters.connects == 2 and bridge.counters.disconnects == 1
        await runtime.wait_cycles(40)
        assert runtime.state().watchdog_tripped  # nothing moves until a fresh target
        assert runtime.state().command["joint1"] == pytest.approx(held, abs=1e-9)
        async with TeleopPublisher(mosquitto.url, PREFIX) as pub:
            for _ in range(200):
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
        async with asyncio.timeout(30):
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
        async with asyncio.timeout(5):
            message = await anext(aiter(client.messages))
        assert json.loads(message.payload)["online"] is False


def resident(pid):
    """Resident memory of process ``pid`` [bytes]."""
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class LoopWindow:
    """The control loop's rate and this process's CPU time per cycle over one window.

    The rate is the median over 0.25 s slices: a neighbour's burst on this shared
    machine stalls a slice or two, a flood that slows the loop shifts them all.
    """

    SLICE = 0.25  # [s]

    def __init__(self, runtime):
        self._runtime = runtime
        self._cycles = runtime.state().stats.cycles
        self._cpu = time.process_time()
        self._rates = []

    async def run(self, seconds):
        cycles, t = self._cycles, time.monotonic()
        for _ in range(round(seconds / self.SLICE)):
            await asyncio.sleep(self.SLICE)
            now, n = time.monotonic(), self._runtime.state().stats.cycles
            self._rates.append((n - cycles) / (now - t))
            cycles, t = n, now
        spent = cycles - self._cycles
        self.rate = statistics.median(self._rates)
        self.cpu_per_cycle = (time.process_time() - self._cpu) / max(spent, 1)
        return self


async def loop_window(runtime, seconds):
    return await LoopWindow(runtime).run(seconds)


async def test_a_flood_of_10000_targets_per_second_keeps_the_loop_rate_and_memory_flat(
    kit, mosquitto
):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url, isolate=True) as link,
    ):
        async with TeleopPublisher(mosquitto.url, PREFIX) as pub:
            await pub.command("enable")
            await kit.eventually(lambda: runtime.mode is Mode.ARMED)
        # Quiet, flood, quiet: the windows share whatever else loads the machine, so the
        # ratios below measure the flood, not the neighbours.
        before = await loop_window(runtime, 2.0)
        # The flood comes from the network: a raw-socket publisher process (it costs
        # almost no CPU) through a broker given low CPU priority, as if on another host.
        os.setpriority(os.PRIO_PROCESS, mosquitto.process.pid, 19)
        flood = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "hilbot.driver.teleop.flood",
            str(mosquitto.port),
            "10000",
            "5",
            "--amplitude",
            "0",  # joint1 stays at home (0): a moving sim arm costs CPU of its own
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert await flood.stdout.readline() == b"flooding\n"
            await asyncio.sleep(1.0)  # warm up: queues and caches reach their steady size
            first = {pid: resident(pid) for pid in (os.getpid(), link.pid)}
            # counts and clock read together: the rates below share one window
            received0, frames0 = link.counters.received, link.target_frames
            t = time.monotonic()
            during = await loop_window(runtime, 2.5)
            elapsed = time.monotonic() - t
            received1, frames1 = link.counters.received, link.target_frames
            grown = {pid: resident(pid) - rss for pid, rss in first.items()}
            sent = int((await flood.stdout.readline()).split()[1])
        finally:
            with contextlib.suppress(ProcessLookupError):
                flood.kill()
            await flood.wait()
        os.setpriority(os.PRIO_PROCESS, mosquitto.process.pid, 0)
        await asyncio.sleep(0.3)  # the broker and the worker drain what is left
        after = await loop_window(runtime, 2.0)
        handled = (received1 - received0) / elapsed
        frames = (frames1 - frames0) / elapsed
        quiet_rate = (before.rate + after.rate) / 2
        print(
            f"loop {before.rate:.1f} Hz before, {during.rate:.1f} Hz during the flood, "
            f"{after.rate:.1f} Hz after; control process CPU per cycle "
            f"{before.cpu_per_cycle * 1e6:.0f} / {during.cpu_per_cycle * 1e6:.0f} / "
            f"{after.cpu_per_cycle * 1e6:.0f} us; worker handled {handled:.0f} msg/s, control "
            f"process took {frames:.0f} target frames/s; resident memory "
            f"+{grown[os.getpid()] / 1024:.0f} KiB (control), "
            f"+{grown[link.pid] / 1024:.0f} KiB (worker)"
        )
        assert sent == 50_000
        assert received1 > received0  # the flood reached the worker (niced: it may lag)
        # The control process sees at most one batch of targets per millisecond (plus the
        # 100 ms counter reports), however fast they arrive: the worker absorbs the flood.
        assert frames <= 1100
        # flat in both processes: bounded queues, conflation, bounded seq table
        assert max(grown.values()) < 1024 * 1024
        state = runtime.state()
        assert state.mode is Mode.ARMED and not state.faults
        # The loop keeps its rate: a ratio to the quiet windows around the flood.
        assert during.rate >= 0.9 * quiet_rate
        # The CPU time per cycle is printed, not asserted: with the arm still, a profile
        # of the flood window shows no new work but the frames above (~30 ms/s), yet the
        # figure grows 10-60 % on this 2-core box, as the flood's processes share the
        # cores (and their caches) with this one.
