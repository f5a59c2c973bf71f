"""MqttClient: a cancel during a QoS 1 round trip is never swallowed (real mosquitto)."""

import asyncio
import random

import aiomqtt
import pytest

from hilbot.driver.teleop.client import MqttClient


async def publish_forever(client):
    while True:
        await client.publish("hilbot/test/cancel", b"x", qos=1, timeout=2.0)


async def swallowed_cancels(client_type, port, rounds):
    """Cancel a QoS 1 publish loop ``rounds`` times at random moments; count the cancels
    that the loop did not honour within 5 s (a swallowed one never is: it publishes on;
    an honoured one takes a moment, or a stall of this busy host)."""
    rng = random.Random(7)
    swallowed = 0
    async with client_type("127.0.0.1", port) as client:
        for _ in range(rounds):
            task = asyncio.create_task(publish_forever(client))
            await asyncio.sleep(rng.uniform(0.0, 0.003))
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=5.0)
            if not done:
                swallowed += 1
                while not task.done():  # cancel again until it goes, for the next round
                    task.cancel()
                    await asyncio.wait({task}, timeout=0.2)
    return swallowed


async def test_mqtt_client_never_swallows_a_cancel(mosquitto):
    assert await swallowed_cancels(MqttClient, mosquitto.port, rounds=300) == 0


async def test_publish_timeout_is_an_mqtt_error(mosquitto):
    async with MqttClient("127.0.0.1", mosquitto.port) as client:
        mosquitto.process.send_signal(19)  # SIGSTOP: the broker stops answering
        try:
            with pytest.raises(aiomqtt.MqttError, match="timed out"):
                await client.publish("hilbot/test/timeout", b"x", qos=1, timeout=0.2)
        finally:
            mosquitto.process.send_signal(18)  # SIGCONT
