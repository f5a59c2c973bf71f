"""A target flood for load tests: messages at a fixed rate through a raw MQTT socket.

Run as ``python tests/driver/teleop/flood.py PORT RATE SECONDS [--bursts N --pause S]`` (the
load tests and ``benchmarks/`` do; it imports nothing of hilbot).
It speaks just enough MQTT 3.1.1 (CONNECT, QoS 0/1 PUBLISH, DISCONNECT) over a plain
socket, with every packet built before the clock starts, so the publisher itself costs
almost no CPU and the load falls on the broker and the robot's teleop side, as from a
client on another host. Prints ``flooding`` once connected, ``on T`` and ``off T`` (T:
``time.monotonic()``) at each change between bursts, and ``sent N`` at the end.

``--payload`` picks what floods: joint targets (default), pose targets, or garbage
(bytes that are no JSON). With ``--stdin-estops`` each line read on stdin makes it
send an ``estop`` on ``cmd`` (QoS 1) in the same TCP stream, behind what it has
already sent, printing ``estop T`` just before; ``RATE`` 0 sends only those: the
e-stop of another client than the flooding one.
"""

from __future__ import annotations

import argparse
import json
import queue
import socket
import sys
import threading
import time
from collections.abc import Sequence

CONNACK = b"\x20\x02"
#: A payload that is no JSON, as long as a joint target.
GARBAGE = b"\xff\xfe" + bytes(range(33, 110))


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


def connect_packet(
    client_id: str, username: str | None = None, password: str | None = None
) -> bytes:
    """CONNECT, clean session, keep-alive 60 s, with optional credentials."""
    flags = 0x02 | (0x80 if username is not None else 0) | (0x40 if password is not None else 0)
    body = string("MQTT") + bytes([4, flags, 0, 60]) + string(client_id)
    if username is not None:
        body += string(username)
    if password is not None:
        body += string(password)
    return packet(0x10, body)


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


def pose_targets(topic: str, position: Sequence[float], count: int) -> list[bytes]:
    """``count`` PUBLISH packets of pose targets, 1 mm around ``position`` [m]."""
    head = string(topic)
    x, y, z = position
    return [
        packet(
            0x30,
            head
            + json.dumps(
                {"seq": seq, "sender": "flood", "position": [x, y, z + 0.001 * (seq % 2)]}
            ).encode(),
        )
        for seq in range(1, count + 1)
    ]


def garbage(topic: str, count: int) -> list[bytes]:
    """``count`` PUBLISH packets whose payload is no JSON."""
    return [packet(0x30, string(topic) + GARBAGE)] * count


def estop_packet(topic: str, packet_id: int) -> bytes:
    """A QoS 1 PUBLISH of ``{"command": "estop"}`` on ``topic``."""
    body = string(topic) + packet_id.to_bytes(2, "big") + b'{"command":"estop"}'
    return packet(0x32, body)


class EstopRequests:
    """Lines on stdin, each one asking for an e-stop (read by a daemon thread)."""

    def __init__(self) -> None:
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            self._lines.put(line)

    def pending(self) -> int:
        """How many e-stops were asked for since the last call."""
        count = 0
        while True:
            try:
                self._lines.get_nowait()
            except queue.Empty:
                return count
            count += 1


def flood(
    port: int,
    rate: float,
    seconds: float,
    packets: Sequence[bytes],
    pause: float = 0.0,
    *,
    client_id: str = "flood",
    estops: EstopRequests | None = None,
    cmd_topic: str = "hilbot/omx/cmd",
) -> int:
    """Send ``packets`` to the broker on 127.0.0.1:``port`` at ``rate`` per second.

    With ``pause`` > 0 the flood runs in bursts of ``seconds`` separated by
    ``pause`` seconds of silence until every packet is sent, printing ``on T`` and
    ``off T`` at each change, T its ``time.monotonic()`` (for a test that compares them).
    With ``estops``, an e-stop is sent on ``cmd_topic`` for each request, and with
    ``rate`` 0 it only waits ``seconds`` for those.
    """
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(connect_packet(client_id))
        if sock.recv(4)[:2] != CONNACK:
            raise ConnectionError("the broker did not accept the connection")
        print("flooding", flush=True)
        if rate <= 0:
            _estops_only(sock, seconds, estops, cmd_topic)
            sock.sendall(b"\xe0\x00")
            return 0
        sent, flooded = 0, 0.0  # [s] of flooding before this burst
        packet_id = 0
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
                for _ in range(estops.pending() if estops is not None else 0):
                    packet_id = packet_id % 65535 + 1
                    print("estop", time.monotonic(), flush=True)
                    sock.sendall(estop_packet(cmd_topic, packet_id))
                time.sleep(0.005)
            flooded += seconds
            if sent < len(packets):
                print("off", time.monotonic(), flush=True)
                time.sleep(pause)
        sock.sendall(b"\xe0\x00")  # DISCONNECT
    return sent


def _estops_only(
    sock: socket.socket, seconds: float, estops: EstopRequests | None, cmd_topic: str
) -> None:
    end, packet_id = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for _ in range(estops.pending() if estops is not None else 0):
            packet_id = packet_id % 65535 + 1
            print("estop", time.monotonic(), flush=True)
            sock.sendall(estop_packet(cmd_topic, packet_id))
        time.sleep(0.001)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="flood.py")
    parser.add_argument("port", type=int)
    parser.add_argument("rate", type=float, help="messages per second (0: e-stops only)")
    parser.add_argument("seconds", type=float, help="of flooding (of each burst with --pause)")
    parser.add_argument("--bursts", type=int, default=1, help="bursts of SECONDS each")
    parser.add_argument("--pause", type=float, default=0.0, help="[s] of silence between bursts")
    parser.add_argument("--topic", default="hilbot/omx/joints/target")
    parser.add_argument("--joint", default="joint1")
    parser.add_argument("--amplitude", type=float, default=0.2, help="[rad]")
    parser.add_argument("--payload", choices=("joints", "pose", "garbage"), default="joints")
    parser.add_argument(
        "--position", type=float, nargs=3, default=(0.2, 0.0, 0.2), help="pose targets [m]"
    )
    parser.add_argument("--client-id", default="flood")
    parser.add_argument("--cmd-topic", default="hilbot/omx/cmd")
    parser.add_argument(
        "--stdin-estops", action="store_true", help="send an e-stop per line read on stdin"
    )
    args = parser.parse_args(argv)
    count = int(args.rate * args.seconds * args.bursts)
    match args.payload:
        case "pose":
            packets = pose_targets(args.topic, args.position, count)
        case "garbage":
            packets = garbage(args.topic, count)
        case _:
            packets = joint_targets(args.topic, args.joint, args.amplitude, count)
    estops = EstopRequests() if args.stdin_estops else None
    sent = flood(
        args.port,
        args.rate,
        args.seconds,
        packets,
        args.pause,
        client_id=args.client_id,
        estops=estops,
        cmd_topic=args.cmd_topic,
    )
    print("sent", sent, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
