"""A target flood for load tests: joint targets at a fixed rate through a raw MQTT socket.

Run as ``python -m hilbot.driver.teleop.flood PORT RATE SECONDS [--bursts N --pause S]``.
It speaks just enough MQTT 3.1.1 (CONNECT, QoS 0 PUBLISH, DISCONNECT) over a plain
socket, with every packet built before the clock starts, so the publisher itself costs
almost no CPU and the load falls on the broker and the robot's teleop side, as from a
client on another host. Prints ``flooding`` once connected, ``on T`` and ``off T`` (T:
``time.monotonic()``) at each change between bursts, and ``sent N`` at the end.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from collections.abc import Sequence

CONNACK = b"\x20\x02"


def packet(kind: int, body: bytes) -> bytes:
    """One MQTT control packet: type byte, variable-length size, body."""
    size, encoded = len(body), bytearray()
    while True:
        size, digit = divmod(size, 128)
        encoded.append(digit | (0x80 if size else 0))
        if not size:
            return bytes([kind]) + bytes(encoded) + body


def string(text: str) -> bytes:
    """An MQTT UTF-8 string: 2-byte length, then the bytes."""
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def joint_targets(topic: str, joint: str, amplitude: float, count: int) -> list[bytes]:
    """``count`` PUBLISH packets of joint targets; the joint toggles every 500 messages."""
    head = string(topic)
    return [
        packet(
            0x30,
            head
            + json.dumps(
                {
                    "seq": seq,
                    "sender": "flood",
                    "positions": {joint: amplitude * ((seq // 500) % 2)},
                }
            ).encode(),
        )
        for seq in range(1, count + 1)
    ]


def flood(
    port: int, rate: float, seconds: float, packets: Sequence[bytes], pause: float = 0.0
) -> int:
    """Send ``packets`` to the broker on 127.0.0.1:``port`` at ``rate`` per second.

    With ``pause`` > 0 the flood runs in bursts of ``seconds`` separated by
    ``pause`` seconds of silence until every packet is sent, printing ``on T`` and
    ``off T`` at each change, T its ``time.monotonic()`` (for a test that compares them).
    """
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(packet(0x10, string("MQTT") + bytes([4, 2, 0, 60]) + string("flood")))
        if sock.recv(4)[:2] != CONNACK:
            raise ConnectionError("the broker did not accept the connection")
        print("flooding", flush=True)
        sent, flooded = 0, 0.0  # [s] of flooding before this burst
        while sent < len(packets):
            start = time.monotonic()
            if pause > 0:
                print("on", start, flush=True)
            while sent < len(packets):
                elapsed = time.monotonic() - start
                if pause > 0 and elapsed >= seconds:
                    break
                due = min(len(packets), int((flooded + elapsed) * rate))
                if due > sent:
                    sock.sendall(b"".join(packets[sent:due]))
                    sent = due
                time.sleep(0.005)
            flooded += seconds
            if sent < len(packets):
                print("off", time.monotonic(), flush=True)
                time.sleep(pause)
        sock.sendall(b"\xe0\x00")  # DISCONNECT
    return sent


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m hilbot.driver.teleop.flood")
    parser.add_argument("port", type=int)
    parser.add_argument("rate", type=float, help="messages per second")
    parser.add_argument("seconds", type=float, help="of flooding (of each burst with --pause)")
    parser.add_argument("--bursts", type=int, default=1, help="bursts of SECONDS each")
    parser.add_argument("--pause", type=float, default=0.0, help="[s] of silence between bursts")
    parser.add_argument("--topic", default="hilbot/omx/joints/target")
    parser.add_argument("--joint", default="joint1")
    parser.add_argument("--amplitude", type=float, default=0.2, help="[rad]")
    args = parser.parse_args(argv)
    count = int(args.rate * args.seconds * args.bursts)
    packets = joint_targets(args.topic, args.joint, args.amplitude, count)
    print("sent", flood(args.port, args.rate, args.seconds, packets, args.pause), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
