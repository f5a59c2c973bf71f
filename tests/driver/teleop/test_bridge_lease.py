"""One operator at a time, one stop for all: three drivers on one real mosquitto.

Each driver is a simulated OpenManipulator-X with a real bridge (two of them in
this process, one through the teleop worker process as ``hilbot run`` serves);
the operators are real MQTT clients with their own ``sender``.
"""

import contextlib
import json

import aiomqtt

from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop import TeleopPublisher

NAMES = ("omx1", "omx2", "omx3")


@contextlib.asynccontextmanager
async def three_drivers(kit, url, **fields):
    """Three simulated arms, ``hilbot/omx1`` .. ``hilbot/omx3``, served on ``url``."""
    async with contextlib.AsyncExitStack() as stack:
        runtimes = []
        for index, name in enumerate(NAMES):
            runtime = await stack.enter_async_context(kit.running_sim(chains=False))
            settings = kit.fast.model_copy(update={"prefix": f"hilbot/{name}", **fields})
            await stack.enter_async_context(kit.serving(runtime, url, settings, isolate=index == 2))
            runtimes.append(runtime)
        yield runtimes


def near(runtime, joint1):
    """Whether the runtime commands joint1 at ``joint1`` (its motion profile approaches it)."""
    return abs(runtime.state().command["joint1"] - joint1) < 1e-3


def refusals(pub, reason="not_lease_holder"):
    return [e for e in pub.errors if e["reason"] == reason]


async def test_the_operator_who_armed_holds_the_lease_and_anyone_may_estop(kit, mosquitto):
    async with (
        three_drivers(kit, mosquitto.url) as (robot, *_),
        TeleopPublisher(mosquitto.url, "hilbot/omx1", sender="alice") as alice,
        TeleopPublisher(mosquitto.url, "hilbot/omx1", sender="bob") as bob,
    ):
        await alice.command("enable")
        await kit.eventually(lambda: robot.mode is Mode.ARMED, what="armed by alice")
        await alice.wait_until(lambda p: (p.state or {}).get("lease") == "alice")
        await alice.joint_target({"joint1": 0.2})
        # Bob's targets and commands are refused, each with the reason and the holder.
        await bob.joint_target({"joint1": -0.5})
        await bob.command("disable")
        await bob.wait_until(lambda p: len(refusals(p)) >= 2, 10.0)
        assert {e["topic"] for e in refusals(bob)} == {
            "hilbot/omx1/joints/target",
            "hilbot/omx1/cmd",
        }
        assert "leased to sender 'alice'" in refusals(bob)[0]["detail"]
        assert robot.mode is Mode.ARMED
        assert not near(robot, -0.5)
        # An e-stop is anyone's.
        await bob.command("estop")
        await kit.eventually(lambda: robot.mode is Mode.ESTOPPED, what="e-stopped by bob")


async def test_the_lease_ends_on_disable_release_and_silence(kit, mosquitto):
    async with (
        three_drivers(kit, mosquitto.url, lease_timeout_s=0.5) as (one, two, three),
        TeleopPublisher(mosquitto.url, "hilbot/omx1", sender="alice") as alice1,
        TeleopPublisher(mosquitto.url, "hilbot/omx1", sender="bob") as bob1,
        TeleopPublisher(mosquitto.url, "hilbot/omx2", sender="alice") as alice2,
        TeleopPublisher(mosquitto.url, "hilbot/omx2", sender="bob") as bob2,
        TeleopPublisher(mosquitto.url, "hilbot/omx3", sender="alice") as alice3,
        TeleopPublisher(mosquitto.url, "hilbot/omx3", sender="bob") as bob3,
    ):
        # disable: bob's enable is refused while alice holds it, then accepted.
        await alice1.command("enable")
        await kit.eventually(lambda: one.mode is Mode.ARMED)
        await bob1.command("enable")
        await bob1.wait_until(lambda p: len(refusals(p)) == 1)
        await alice1.command("disable")
        await kit.eventually(lambda: one.mode is Mode.DISARMED)
        await bob1.command("enable")
        await kit.eventually(lambda: one.mode is Mode.ARMED, what="armed by bob after disable")
        await bob1.wait_until(lambda p: (p.state or {}).get("lease") == "bob")
        # release: the robot stays armed, and bob may drive it.
        await alice2.command("enable")
        await kit.eventually(lambda: two.mode is Mode.ARMED)
        await alice2.command("release")
        await alice2.wait_until(lambda p: p.state is not None and p.state.get("lease") is None)
        await bob2.joint_target({"joint1": 0.1})
        await kit.eventually(lambda: near(two, 0.1), what="bob's target")
        assert refusals(bob2) == [] and two.mode is Mode.ARMED
        # silence: alice says nothing for longer than the lease timeout.
        await alice3.command("enable")
        await kit.eventually(lambda: three.mode is Mode.ARMED)
        # the state alice sees says she holds it (an earlier state, from before her enable,
        # says nobody does: waiting for "nobody" below must not end on that one)
        await alice3.wait_until(lambda p: (p.state or {}).get("lease") == "alice")
        await bob3.joint_target({"joint1": 0.1})
        await bob3.wait_until(lambda p: len(refusals(p)) == 1)
        await alice3.wait_until(lambda p: p.state is not None and p.state.get("lease") is None)
        await bob3.joint_target({"joint1": 0.15})
        await kit.eventually(lambda: near(three, 0.15), what="bob's target after the silence")
        assert len(refusals(bob3)) == 1


async def test_the_fleet_stop_topic_stops_every_driver_and_takes_estop_only(kit, mosquitto):
    async with contextlib.AsyncExitStack() as stack:
        runtimes = await stack.enter_async_context(three_drivers(kit, mosquitto.url))
        operators = []
        for name, runtime in zip(NAMES, runtimes, strict=True):
            pub = await stack.enter_async_context(
                TeleopPublisher(mosquitto.url, f"hilbot/{name}", sender=f"op-{name}")
            )
            await pub.command("enable")
            await kit.eventually(lambda r=runtime: r.mode is Mode.ARMED, what=f"{name} armed")
            operators.append(pub)
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as anyone:
            # Anything but estop is refused there, by every driver, on its error topic.
            await anyone.publish("hilbot/_all/cmd", json.dumps({"command": "disable"}), qos=1)
            for pub in operators:
                await pub.wait_until(lambda p: len(refusals(p, "refused")) == 1, 10.0)
                assert "takes only 'estop'" in refusals(pub, "refused")[0]["detail"]
            assert all(r.mode is Mode.ARMED for r in runtimes)
            await anyone.publish("hilbot/_all/cmd", json.dumps({"command": "estop"}), qos=1)
        for name, runtime in zip(NAMES, runtimes, strict=True):
            await kit.eventually(
                lambda r=runtime: r.mode is Mode.ESTOPPED, what=f"{name} e-stopped"
            )
