"""The bridge's inbox hands each message on the moment it arrives (pure)."""

from aiomqtt import Message

from hilbot.driver.teleop import Topics
from hilbot.driver.teleop.bridge import dispatching_queue


def message(topic, payload):
    return Message(topic, payload, qos=0, retain=False, mid=0, properties=None)


def test_the_inbox_hands_on_every_message_at_once_and_queues_none():
    topics = Topics("hilbot/omx")
    seen = []
    queue = dispatching_queue(lambda *args: seen.append(args))()
    queue.put_nowait(message(topics.target("arm"), b"1"))
    queue.put_nowait(message(topics.target("arm"), bytearray(b"2")))
    queue.put_nowait(message(topics.cmd, "3"))
    queue.put_nowait(message(topics.joints, None))
    assert seen == [
        (topics.target("arm"), b"1", False),
        (topics.target("arm"), b"2", False),
        (topics.cmd, b"3", False),
        (topics.joints, b"", False),
    ]
    assert queue.empty()
