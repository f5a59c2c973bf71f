"""The embedded broker's ingress: MQTT framing, and lanes that keep commands ahead of floods."""

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hilbot.driver.teleop.amqtt_broker import FramingError, IngressReader, split_packets


def _script(name: str) -> ModuleType:
    """Import the script ``name``.py beside this test (the tests are no package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


_flood = _script("flood")
connect_packet, estop_packet, packet, string = (
    _flood.connect_packet,
    _flood.estop_packet,
    _flood.packet,
    _flood.string,
)


def publish(topic: str, payload: bytes, qos: int = 0) -> bytes:
    ident = b"\x00\x01" if qos else b""
    return packet(0x30 | qos << 1, string(topic) + ident + payload)


DISCONNECT = b"\xe0\x00"


def test_split_packets_frames_whole_packets_and_keeps_the_rest():
    big = publish("a/target/arm", b"x" * 300)  # a two-byte remaining length
    data = connect_packet("c") + big + publish("a/cmd", b"{}", qos=1) + DISCONNECT
    frames, rest = split_packets(data + big[:7])
    assert [f.kind for f in frames] == [1, 3, 3, 14]
    assert frames[1].topic == b"a/target/arm" and frames[1].qos == 0 and frames[1].data == big
    assert frames[2].topic == b"a/cmd" and frames[2].qos == 1
    assert rest == big[:7]
    assert split_packets(b"\x30")[1] == b"\x30"  # not even a length yet


def test_split_packets_refuses_a_remaining_length_longer_than_four_bytes():
    with pytest.raises(FramingError):
        split_packets(b"\x30\xff\xff\xff\xff\x01")


async def reading(chunks: list[bytes], *, may_pass=lambda: True, **kwargs):
    """An IngressReader over a stream fed ``chunks``, then EOF; returns it and the packets."""
    stream = asyncio.StreamReader()
    for chunk in chunks:
        stream.feed_data(chunk)
    stream.feed_eof()
    ingress = IngressReader(stream, may_pass=may_pass, **kwargs)
    packets = []
    while True:
        first = await ingress.read(1)
        if not first:
            break
        length, size = await ingress.read(1), 0
        size = length[0]  # the tests' packets are < 128 bytes
        packets.append(first + length + await ingress.read(size))
    ingress.close()
    return ingress, packets


async def test_a_flood_is_conflated_to_the_newest_per_topic_and_commands_keep_their_order():
    targets = [publish("r/target/arm", b"%d" % i) for i in range(1000)]
    joints = [publish("r/joints/target", b"j%d" % i) for i in range(10)]
    estop = estop_packet("r/cmd", 7)
    qos0_cmd = publish("r/cmd", b'{"command":"reset"}')
    stream = b"".join(targets[:500] + joints + [estop] + targets[500:] + [qos0_cmd, DISCONNECT])
    ingress, packets = await reading([stream[i : i + 1000] for i in range(0, len(stream), 1000)])
    # Commands (whatever their QoS) first and in order; then the newest target of each
    # topic; DISCONNECT last, after everything published before it.
    assert packets[:2] == [estop, qos0_cmd]
    assert sorted(packets[2:4]) == sorted([targets[-1], joints[-1]])
    assert packets[4:] == [DISCONNECT]
    assert ingress.counters.conflated == 1000 - 1 + 10 - 1


async def test_bulk_waits_while_the_broker_is_behind_but_commands_do_not():
    allowed = asyncio.Event()
    stream = publish("r/target/arm", b"t") + estop_packet("r/cmd", 1)
    ingress = IngressReader(_fed([stream]), may_pass=allowed.is_set)
    first = await asyncio.wait_for(ingress.read(2), 5)
    assert first[0] == 0x32  # the e-stop went ahead of the held target
    await ingress.read(first[1])
    pending = asyncio.ensure_future(ingress.read(1))
    await asyncio.sleep(0.05)
    assert not pending.done()  # the target is held while the broker is behind
    allowed.set()
    assert await asyncio.wait_for(pending, 5) == b"\x30"
    ingress.close()


async def test_publishes_on_more_topics_than_the_limit_are_dropped():
    stream = b"".join(publish(f"r/target/t{i}", b"x") for i in range(10))
    ingress, packets = await reading([stream], max_topics=4)
    assert len(packets) == 4 and ingress.counters.dropped == 6


async def test_a_stream_that_is_not_mqtt_is_handed_on_unchanged():
    junk = b"\x30\xff\xff\xff\xff\x01garbage"
    ingress, _ = await reading([])
    ingress = IngressReader(_fed([junk]), may_pass=lambda: True)
    assert await asyncio.wait_for(ingress.read(len(junk)), 5) == junk
    assert await ingress.read(1) == b""
    ingress.close()


def _fed(chunks: list[bytes]) -> asyncio.StreamReader:
    stream = asyncio.StreamReader()
    for chunk in chunks:
        stream.feed_data(chunk)
    stream.feed_eof()
    return stream


async def test_qos1_publishes_keep_their_order_and_wait_like_bulk_while_commands_go_first():
    allowed = asyncio.Event()
    held = [publish("r/joints/target", b"%d" % i, qos=1) for i in range(3)]
    estop = estop_packet("r/cmd", 9)
    ingress = IngressReader(_fed([b"".join([*held, estop])]), may_pass=allowed.is_set)
    head = await asyncio.wait_for(ingress.read(2), 5)
    assert head[0] == 0x32 and head + await ingress.read(head[1]) == estop
    pending = asyncio.ensure_future(ingress.read(len(held[0])))
    await asyncio.sleep(0.05)
    assert not pending.done()  # QoS 1 targets are not conflated, but wait for the broker
    allowed.set()
    got = [await asyncio.wait_for(pending, 5)]
    got += [await ingress.read(len(p)) for p in held[1:]]
    assert got == held
    ingress.close()


async def test_a_huge_packet_ends_the_filtering_and_the_stream_goes_on_unchanged():
    small = publish("r/target/arm", b"t")
    huge = publish("r/target/arm", b"x" * (2 << 20))  # over MAX_PACKET
    tail = publish("r/joints/target", b"j")
    stream = small + huge + tail
    chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
    ingress = IngressReader(_fed(chunks), may_pass=lambda: True)
    data = await asyncio.wait_for(ingress.read(len(stream)), 10)
    assert data == stream and await ingress.read(1) == b""
    ingress.close()
