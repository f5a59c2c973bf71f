"""The embedded broker sends a new client only the retained messages of its own subscriptions.

amqtt 0.12.1 sends every connecting client the retained messages matching any
client's subscriptions: a client subscribed to an unrelated topic received the
robot's retained ``status``. Real aiomqtt clients against the real embedded broker.
"""

import asyncio

import aiomqtt

from hilbot.driver.teleop.broker import EmbeddedBroker

STATUS = "hilbot/omx/status"


async def _received_after_sync(broker_port: int, topic_filter: str) -> list[str]:
    """Topics a fresh client receives once subscribed to ``topic_filter``.

    The client then subscribes to a topic of its own and waits for its own message
    there: the broker handles a client's packets in order, so whatever it sends on
    connecting and subscribing arrives before that message.
    """
    received: list[str] = []
    async with aiomqtt.Client("127.0.0.1", broker_port, identifier="bystander") as client:
        await client.subscribe(topic_filter, qos=1)
        await client.subscribe("bystander/sync", qos=1)
        await client.publish("bystander/sync", b"done", qos=1)

        async def until_sync() -> None:
            async for message in client.messages:
                if message.topic.value == "bystander/sync":
                    return
                received.append(message.topic.value)

        await asyncio.wait_for(until_sync(), 20)
    return received


async def _first_message(client: aiomqtt.Client, topic: str) -> None:
    async def wait() -> None:
        async for message in client.messages:
            if message.topic.value == topic:
                return

    await asyncio.wait_for(wait(), 20)


async def test_a_client_gets_no_retained_message_of_another_clients_subscription():
    async with (
        EmbeddedBroker(port=0) as broker,
        aiomqtt.Client("127.0.0.1", broker.port, identifier="robot") as robot,
    ):
        await robot.subscribe(STATUS, qos=1)  # the robot follows its own status
        await robot.publish(STATUS, b'{"online": true}', qos=1, retain=True)
        await _first_message(robot, STATUS)
        leaked = await _received_after_sync(broker.port, "nothing/here")
        assert leaked == [], f"a client subscribed to nothing/here received {leaked}"
        # A client that does subscribe to it still gets the retained status.
        assert await _received_after_sync(broker.port, "hilbot/+/status") == [STATUS]
