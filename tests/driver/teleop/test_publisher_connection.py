"""The operator's connection: nobody can kick it off, it comes back, and so does its e-stop.

A real mosquitto (killed and restarted), the simulated arm with its real bridge, and
``hilbot teleop`` as the operator runs it: in a child process, jogging on a terminal.
"""

import asyncio
import json
import logging
import os
import pty
import subprocess
import sys

import aiomqtt
import pytest

from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Command
from hilbot.driver.teleop import TeleopPublisher
from hilbot.driver.teleop.errors import NotConnected
from hilbot.driver.teleop.publisher import JOG_COMMANDS
from hilbot.sim.sim_backend import SimBackend

PREFIX = "hilbot/omx"
WAIT = 120.0  # [s] start-up imports on a busy machine


async def test_a_client_connecting_with_the_old_style_id_does_not_drop_the_operator(kit, mosquitto):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url),
        TeleopPublisher(mosquitto.url, PREFIX, sender="op") as operator,
    ):
        ident = operator.client.identifier
        assert ident.startswith("hilbot-teleop-") and ident != "hilbot-teleop-op"  # random
        # Anyone who reads a target learns its sender, and once connected as
        # hilbot-teleop-<sender>; the broker drops a client whose id is taken.
        async with aiomqtt.Client(
            "127.0.0.1", mosquitto.port, identifier="hilbot-teleop-op"
        ) as eve:
            # The broker handles eve's CONNECT before this: the operator, still
            # connected, receives it on the error topic it follows.
            await eve.publish(f"{PREFIX}/error", json.dumps({"detail": "still here?"}), qos=1)
            await operator.wait_until(
                lambda p: any(e.get("detail") == "still here?" for e in p.errors), 10.0
            )
            assert operator.reconnects == 0 and operator.connected.is_set()
            await operator.command("enable")
            await kit.eventually(lambda: runtime.mode is Mode.ARMED, what="armed by the operator")


async def test_the_publisher_says_it_lost_the_broker_and_reconnects(kit, mosquitto, caplog):
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
        TeleopPublisher(mosquitto.url, PREFIX, settings=kit.fast) as operator,
    ):
        mosquitto.stop()
        await kit.eventually(lambda: not operator.connected.is_set(), what="the loss noticed")
        await kit.eventually(lambda: not bridge.connected.is_set(), what="the bridge's loss")
        await operator.joint_target({"joint1": 0.1})  # dropped, not raised: the robot holds
        assert operator.dropped >= 1
        with pytest.raises(NotConnected, match="not connected to the MQTT broker"):
            await operator.command("enable")
        mosquitto.start()
        await asyncio.wait_for(operator.connected.wait(), 30)
        assert operator.reconnects == 1
        await asyncio.wait_for(bridge.connected.wait(), 30)  # the robot is back too
        await operator.command("enable")
        await kit.eventually(lambda: runtime.mode is Mode.ARMED, what="armed after the restart")
    said = [r.getMessage() for r in caplog.records if r.name == "hilbot.driver.teleop.publisher"]
    assert sum("lost the MQTT broker" in m for m in said) == 1, said
    assert sum("reconnected to the MQTT broker" in m for m in said) == 1, said


def key(command):
    """The jog key of ``command``."""
    return next(k for k, c in JOG_COMMANDS.items() if c == command).encode()


class Stderr:
    """A child's stderr, read as it comes; ``until`` waits for a text with a deadline."""

    def __init__(self, stream):
        self.text = ""
        self._task = asyncio.ensure_future(self._read(stream))

    async def _read(self, stream):
        while chunk := await stream.read(4096):
            self.text += chunk.decode(errors="replace")

    async def until(self, words, timeout=WAIT):
        async def wait():
            while words not in self.text:
                if self._task.done():
                    raise AssertionError(f"{words!r} never said; stderr: {self.text}")
                await asyncio.sleep(0.02)

        try:
            await asyncio.wait_for(wait(), timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise AssertionError(
                f"{words!r} not said in {timeout} s; stderr: {self.text}"
            ) from None


async def test_hilbot_teleop_delivers_an_estop_pressed_while_the_broker_was_down(kit, mosquitto):
    async with kit.running_sim() as runtime, kit.serving(runtime, mosquitto.url):
        controller, terminal = pty.openpty()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hilbot", "teleop", "--mqtt", mosquitto.url,
            "--robot", "omx", "--pattern", "jog",
            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(terminal)
        stderr = Stderr(proc.stderr)
        try:
            await stderr.until("jog: w/s")
            os.write(controller, key("enable"))
            await kit.eventually(lambda: runtime.mode is Mode.ARMED, 30, what="armed by the key")
            mosquitto.stop()
            await stderr.until("lost the MQTT broker", 30)
            os.write(controller, key("estop"))  # while nothing can carry it
            await stderr.until("e-stop NOT delivered", 30)
            assert proc.returncode is None  # hilbot teleop is still there, e-stop key and all
            mosquitto.start()
            await kit.eventually(lambda: runtime.mode is Mode.ESTOPPED, 60, what="e-stopped")
            await stderr.until("e-stop delivered", 30)
            os.write(controller, b"q")
            await asyncio.wait_for(proc.wait(), 30)
            assert proc.returncode == 0, stderr.text
            assert "Traceback" not in stderr.text
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            os.close(controller)


async def test_hilbot_lead_says_it_lost_the_broker_reconnects_and_leads_again(
    kit, mosquitto, tmp_path
):
    config = load_config("koch_v1_1_follower")
    backend = SimBackend(config.servo_specs(), initial_positions=config.home)
    settings = kit.fast.model_copy(update={"prefix": config.teleop.topic_prefix(config.name)})
    async with (
        Runtime(config, backend) as runtime,
        kit.serving(runtime, mosquitto.url, settings) as bridge,
    ):
        await runtime.command(Command.ENABLE)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hilbot", "lead", "koch_v1_1_leader", "--backend", "virtual",
            "--demo", "wave", "--mqtt", mosquitto.url, "--no-status",
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},  # no calibration of the user's
        )  # fmt: skip
        stderr = Stderr(proc.stderr)
        try:
            await kit.eventually(lambda: bridge.counters.accepted > 10, WAIT, what="led")
            mosquitto.stop()
            await stderr.until("lost the MQTT broker", 30)
            mosquitto.start()
            await stderr.until("reconnected to the MQTT broker", 60)
            await asyncio.wait_for(bridge.connected.wait(), 30)
            before = bridge.counters.accepted
            await kit.eventually(
                lambda: bridge.counters.accepted > before + 10, 30, what="led after the restart"
            )
            assert proc.returncode is None and "Traceback" not in stderr.text
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


async def test_the_bridge_says_once_that_it_lost_the_broker_and_once_that_it_is_back(
    kit, mosquitto, caplog
):
    caplog.set_level(logging.INFO, logger="hilbot.driver.teleop")

    def said(words, level=logging.WARNING):
        return [r for r in caplog.records if r.levelno >= level and words in r.getMessage()]

    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url) as bridge,
    ):
        mosquitto.stop()
        # Down long enough for several failed attempts on each connection.
        await kit.eventually(lambda: len(said("reconnecting to", logging.INFO)) >= 6, 30)
        mosquitto.start()
        await asyncio.wait_for(bridge.connected.wait(), 30)
        await kit.eventually(lambda: len(said("reconnected to the MQTT broker")) == 2, 30)
    assert len(said("lost the MQTT broker")) == 2  # the targets and the command connection
    assert said("cannot reach") == []  # each failed attempt is no warning of its own
