"""The bridge end to end: a real mosquitto, aiomqtt clients, the simulated arm."""

import asyncio
import itertools
import json
import statistics
import time

import aiomqtt
import jsonschema
import numpy as np
import pytest

from hilbot import _compat_asyncio as aio
from hilbot.driver.runtime.backends import run_queue_wait
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop import TeleopPublisher
from hilbot.driver.teleop.schema import load_schema

PREFIX = "hilbot/omx"


async def armed(kit, runtime, pub):
    await pub.command("enable")
    await kit.eventually(lambda: runtime.mode is Mode.ARMED, what="armed")


async def test_joint_targets_move_the_sim_arm(kit, mosquitto):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        await armed(kit, runtime, pub)
        goal = {"joint1": 0.4, "joint2": -0.8}
        # Until it is there, or a deadline (not a number of targets: a busy host sends them
        # slower, and the sim arm still needs its time to get there).
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            await pub.joint_target(goal)
            await asyncio.sleep(0.01)
            position = runtime.state().joints.positions()
            if all(abs(position[j] - v) < 0.01 for j, v in goal.items()):
                break
        position = runtime.state().joints.positions()
        assert position["joint1"] == pytest.approx(0.4, abs=0.01)
        assert position["joint2"] == pytest.approx(-0.8, abs=0.01)


async def test_every_command_and_the_status_topic(kit, mosquitto):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        status = load_schema("status")

        async def expect(command, mode):
            await pub.command(command)
            await kit.eventually(lambda: runtime.mode is mode, what=f"{command} -> {mode}")
            await pub.wait_until(lambda p: p.status is not None and p.status["mode"] == mode.value)
            jsonschema.validate(pub.status, status)
            assert pub.status["online"] is True

        await expect("enable", Mode.ARMED)
        assert pub.status["armed"] is True
        await pub.command("home")
        await kit.eventually(lambda: runtime.state().homing, what="homing")
        await expect("disable", Mode.DISARMED)
        await expect("reboot", Mode.DISARMED)
        await expect("enable", Mode.ARMED)
        await expect("estop", Mode.ESTOPPED)
        assert pub.status["estopped"] is True
        await expect("reset", Mode.DISARMED)
        # A command the mode does not allow is refused on the error topic, with its seq.
        seq = await pub.command("home")
        await pub.wait_until(lambda p: any(e["reason"] == "refused" for e in p.errors))
        error = next(e for e in pub.errors if e["reason"] == "refused")
        assert error["seq"] == seq and error["topic"] == f"{PREFIX}/cmd"
        jsonschema.validate(error, load_schema("error"))


async def test_estop_is_honoured_even_when_stale_or_retained(kit, mosquitto):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
        TeleopPublisher(mosquitto.url, PREFIX, sender="pad") as pub,
    ):
        await armed(kit, runtime, pub)
        stale = json.dumps({"seq": 0, "sender": "pad", "command": "estop"})
        await pub.client.publish(f"{PREFIX}/cmd", stale, qos=1)
        await kit.eventually(lambda: runtime.mode is Mode.ESTOPPED, what="estopped")
        assert bridge.counters.rejected.total() == 0


async def test_telemetry_matches_the_schema_and_the_rate(kit, mosquitto):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url),
        aiomqtt.Client("127.0.0.1", mosquitto.port) as client,
    ):
        await client.subscribe(f"{PREFIX}/state")
        schema = load_schema("state")
        stamps = []
        waited = None
        async with aio.timeout(30):  # about 0.5 s; a busy host may stall a while
            async for message in client.messages:
                state = json.loads(message.payload)
                jsonschema.validate(state, schema)
                stamps.append(state["stamp"])
                if waited is None:
                    waited = run_queue_wait()  # this loop's thread runs the runtime too
                if len(stamps) == 26:
                    break
        waited = run_queue_wait() - waited if waited is not None else 0.0
        assert state["joints"]["names"] == list(runtime.joint_names)
        assert state["mode"] == "disarmed"
        assert state["stats"]["target_rate"] == 200
        rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
        # Configured 50 Hz, decimated from the 200 Hz loop. Never faster (on average). The
        # usual interval, the median, is at most five times the configured one (a stall
        # lengthens an interval or two, not most of them) plus the time the host kept this
        # event loop's thread (the runtime's, the bridge's, this client's) from a CPU per
        # interval: measured by the kernel, 0 on an idle host, over 50 % of the time with
        # two CPU-bound neighbours on 2 cores.
        typical = statistics.median(b - a for a, b in itertools.pairwise(stamps))
        allowed = 5 / 50 + waited / (len(stamps) - 1)
        print(
            f"state {rate:.1f} Hz, median interval {typical * 1e3:.0f} ms of "
            f"{allowed * 1e3:.0f} allowed (waited for a CPU {waited:.2f} s)"
        )
        assert rate < 65 and typical <= allowed, (rate, typical, allowed, waited)


async def test_bad_payloads_are_rejected_and_never_move_the_arm(kit, mosquitto):
    bad = {
        "not_json": b"{nope",
        "invalid": json.dumps({"seq": 1, "positions": {"joint1": "fast"}}),
        "non_finite": b'{"seq": 2, "positions": {"joint1": Infinity}}',
        "unknown_joint": json.dumps({"seq": 3, "positions": {"elbow": 1.0}}),
        "oversized": json.dumps({"seq": 4, "positions": {"joint1": 1.0}, "pad": "x" * 5000}),
    }
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        await armed(kit, runtime, pub)
        before = runtime.state().command
        for reason, payload in bad.items():
            # one at a time here, to see each one's error before the next (the burst test
            # below sends them back to back)
            await pub.client.publish(f"{PREFIX}/joints/target", payload)
            await pub.wait_until(lambda p, r=reason: r in {e["reason"] for e in p.errors}, 15.0)
        await pub.client.publish(
            f"{PREFIX}/target/leg", json.dumps({"seq": 1, "position": [0, 0, 0]})
        )
        await pub.client.publish(f"{PREFIX}/cmd", json.dumps({"seq": 9, "command": "fly"}), qos=1)
        await pub.client.publish(f"{PREFIX}/nothing", b"{}")  # not subscribed: never seen
        expected = {*bad, "unknown_chain", "unknown_command"}
        try:
            await pub.wait_until(lambda p: {e["reason"] for e in p.errors} >= expected, 15.0)
        except TimeoutError:
            seen = {e["reason"] for e in pub.errors}
            raise AssertionError(f"no error for {expected - seen}; {bridge.counters}") from None
        for error in pub.errors:
            jsonschema.validate(error, load_schema("error"))
        assert {e["seq"] for e in pub.errors if e["reason"] == "unknown_joint"} == {3}
        assert set(bridge.counters.rejected) == expected
        await runtime.wait_cycles(20)
        state = runtime.state()
        assert state.mode is Mode.ARMED
        np.testing.assert_allclose(list(state.command.values()), list(before.values()), atol=1e-9)


def burst():
    """Joint targets on one topic, good and bad mixed; the last good ones set joint1 0.3
    and (merged, as the runtime merges joint targets) joint2 -0.95."""

    def good(seq, value):
        return json.dumps({"seq": seq, "sender": "burst", "positions": {"joint1": value}})

    def bad(seq, positions):
        return json.dumps({"seq": seq, "sender": "burst", "positions": positions})

    messages = [
        (None, good(1, 0.1)),
        (("invalid", 2), bad(2, {"joint1": "fast"})),
        (None, good(3, 0.2)),
        (None, json.dumps({"seq": 4, "sender": "burst", "positions": {"joint2": -0.95}})),
        (("non_finite", 5), b'{"seq": 5, "sender": "burst", "positions": {"joint1": NaN}}'),
        (("not_json", None), b'{"seq": 6, "positions": {"joint1": 0.9'),
        (None, good(7, 0.3)),
        (("unknown_joint", 8), bad(8, {"elbow": 0.9})),
        (("oversized", None), bad(9, {"joint1": 0.9, "pad": "x" * 5000})),
        (("invalid", 10), bad(10, {"joint1": True})),
        (("stale_seq", 6), good(6, 0.9)),  # well-formed, but older than seq 7
        (("invalid", 11), bad(11, {"joint1": 2000.0})),
    ]
    return messages


@pytest.mark.parametrize("isolate", [False, True], ids=["in_process", "worker"])
async def test_a_burst_mixing_bad_and_good_targets_reports_every_bad_one_and_ends_at_the_last_good(
    kit, mosquitto, isolate
):
    messages = burst()
    expected = sorted((r for r, _ in messages if r is not None), key=str)
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url, isolate=isolate) as bridge,
        # The sender of the burst arms the robot: it holds the lease.
        TeleopPublisher(mosquitto.url, PREFIX, sender="burst") as pub,
    ):
        await armed(kit, runtime, pub)
        for _, payload in messages:  # back to back, no sleeps: one flush window or less
            await pub.client.publish(f"{PREFIX}/joints/target", payload)
        try:
            await pub.wait_until(lambda p: len(p.errors) >= len(expected), 15.0)
        except TimeoutError:
            raise AssertionError(f"errors {pub.errors}; {bridge.counters}") from None
        got = sorted(((e["reason"], e["seq"]) for e in pub.errors), key=str)
        assert got == expected
        for error in pub.errors:
            jsonschema.validate(error, load_schema("error"))
            assert error["topic"] == f"{PREFIX}/joints/target" and error["detail"]
        # The arm goes to the last good target and stays there: no bad one moved it. (The
        # motion layer's approach ends within 0.1 mrad once the watchdog stops the stream.)
        await kit.eventually(
            lambda: runtime.state().command["joint1"] == pytest.approx(0.3, abs=1e-4),
            what="the command reached the last good target",
        )
        await runtime.wait_cycles(20)
        state = runtime.state()
        assert state.mode is Mode.ARMED and not state.faults
        assert state.command["joint1"] == pytest.approx(0.3, abs=1e-4)
        assert state.command["joint2"] == pytest.approx(-0.95, abs=1e-4)
        await kit.eventually(lambda: bridge.counters.rejected.total() == len(expected))
        assert bridge.counters.received == bridge.counters.accepted + len(expected)


async def test_stale_seq_and_expired_targets_are_dropped(kit, mosquitto):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
        TeleopPublisher(mosquitto.url, PREFIX, sender="pad") as pub,
    ):
        await armed(kit, runtime, pub)
        topic = f"{PREFIX}/joints/target"
        await pub.client.publish(
            topic, json.dumps({"seq": 10, "sender": "pad", "positions": {"joint1": 0.1}})
        )
        await pub.client.publish(
            topic, json.dumps({"seq": 10, "sender": "pad", "positions": {"joint1": 0.9}})
        )
        await pub.client.publish(
            topic, json.dumps({"seq": 9, "sender": "pad", "positions": {"joint1": 0.9}})
        )
        await pub.client.publish(
            topic,
            json.dumps({"seq": 11, "sender": "pad", "stamp": 1.0, "positions": {"joint1": 0.9}}),
        )
        await pub.wait_until(lambda p: len(p.errors) >= 3)
        assert [e["reason"] for e in pub.errors] == ["stale_seq", "stale_seq", "expired"]
        assert bridge.counters.accepted >= 2  # enable + the first target
        await runtime.wait_cycles(100)
        assert runtime.state().command["joint1"] == pytest.approx(0.1, abs=1e-4)
