"""Broker loss, the last will, retained targets, floods: the bridge under a flaky network."""

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
import time
import tracemalloc

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


LAST_WILL_CHILD = textwrap.dedent(
    """
    import asyncio, sys, yaml
    from pathlib import Path
    import hilbot.configs
    from hilbot.driver.config import parse_config
    from hilbot.driver.runtime import Runtime
    from hilbot.driver.teleop import TeleopSettings, serve
    from hilbot.sim.sim_backend import SimBackend

    robots = Path(hilbot.configs.__file__).parent / "robots"
    data = yaml.safe_load((robots / "openmanipulator_x.yaml").read_text())
    data["chains"] = []
    config = parse_config(data, base_dir=robots)

    async def main():
        backend = SimBackend(config.servo_specs(), initial_positions=config.home)
        async with Runtime(config, backend) as runtime:
            ready = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(
                serve(runtime, TeleopSettings(keepalive_s=1), sys.argv[1], robot_name="omx",
                      ready=ready)
            )
            await ready
            print("ready", flush=True)
            await task

    asyncio.run(main())
    """
)


async def test_last_will_marks_the_robot_offline_when_its_process_dies(kit, mosquitto):
    child = subprocess.Popen(
        [sys.executable, "-c", LAST_WILL_CHILD, mosquitto.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
            await client.subscribe(f"{PREFIX}/status", qos=1)
            statuses = []
            async with asyncio.timeout(20):
                async for message in client.messages:
                    statuses.append(json.loads(message.payload))
                    if statuses[-1]["online"] and child.poll() is None:
                        child.kill()  # SIGKILL: no goodbye, only the broker's last will
                    elif not statuses[-1]["online"]:
                        break
            assert statuses[0]["online"] is True and statuses[0]["mode"] == "disarmed"
            assert statuses[-1] == {**statuses[-1], "online": False, "mode": None}
            async with aiomqtt.Client("127.0.0.1", mosquitto.port) as late:  # it is retained
                await late.subscribe(f"{PREFIX}/status")
                async with asyncio.timeout(5):
                    message = await anext(aiter(late.messages))
                assert message.retain and json.loads(message.payload)["online"] is False
    finally:
        child.kill()
        child.wait(5)


async def test_clean_shutdown_publishes_offline(kit, mosquitto):
    async with kit.running_sim(chains=False) as runtime:
        async with kit.serving(runtime, mosquitto.url):
            pass
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
        await client.subscribe(f"{PREFIX}/status")
        async with asyncio.timeout(5):
            message = await anext(aiter(client.messages))
        assert json.loads(message.payload)["online"] is False


FLOOD_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import aiomqtt

    async def main(port, seconds, rate):
        async with aiomqtt.Client("127.0.0.1", port, max_queued_outgoing_messages=0) as client:
            topic = "hilbot/omx/joints/target"
            start = time.monotonic()
            seq = 0
            print("flooding", flush=True)
            while time.monotonic() - start < seconds:
                due = int((time.monotonic() - start) * rate)
                while seq < due:
                    seq += 1
                    value = 0.2 * ((seq // 1000) % 2)
                    body = {"seq": seq, "sender": "flood", "positions": {"joint1": value}}
                    await client.publish(topic, json.dumps(body))
                await asyncio.sleep(0.002)
            print("sent", seq, flush=True)

    asyncio.run(main(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])))
    """
)


async def test_a_flood_of_10000_targets_per_second_keeps_the_loop_rate_and_memory_flat(
    kit, mosquitto
):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
    ):
        async with TeleopPublisher(mosquitto.url, PREFIX) as pub:
            await pub.command("enable")
            await kit.eventually(lambda: runtime.mode is Mode.ARMED)
        await asyncio.sleep(0.5)
        cycles, t = runtime.state().stats.cycles, time.monotonic()
        await asyncio.sleep(1.0)
        baseline = (runtime.state().stats.cycles - cycles) / (time.monotonic() - t)

        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            FLOOD_CHILD,
            str(mosquitto.port),
            "4",
            "10000",
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert (await child.stdout.readline()).startswith(b"flooding")
            await asyncio.sleep(1.0)  # warm up: queues and caches reach their steady size
            tracemalloc.start()
            try:
                received0 = bridge.counters.received
                cycles, t = runtime.state().stats.cycles, time.monotonic()
                first = tracemalloc.get_traced_memory()[0]
                await asyncio.sleep(2.0)
                grown = tracemalloc.get_traced_memory()[0] - first
                flood_rate = (runtime.state().stats.cycles - cycles) / (time.monotonic() - t)
                received = (bridge.counters.received - received0) / (time.monotonic() - t)
            finally:
                tracemalloc.stop()
            sent = int((await child.stdout.readline()).split()[1])
        finally:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
        print(
            f"baseline {baseline:.1f} Hz, during flood {flood_rate:.1f} Hz, "
            f"bridge saw {received:.0f} msg/s, memory +{grown / 1024:.0f} KiB, sent {sent}"
        )
        assert sent >= 30_000  # the publisher really flooded (4 s at 10,000/s)
        assert flood_rate >= 0.9 * baseline
        assert grown < 512 * 1024
        assert runtime.state().mode is Mode.ARMED
