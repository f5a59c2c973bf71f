"""Publish teleop targets over MQTT: a circle or a figure-eight for a chain, or keyboard jogging.

Connects to the broker of a running ``hilbot run`` (its embedded broker on
127.0.0.1:1883 by default), reads the chain's present end-effector position
from the robot's ``state`` topic, arms the robot (unless --no-enable) and
publishes targets around it until Ctrl+C or --duration. With --robot omitted,
the one robot online on the broker is used. Credentials and TLS come from the
HILBOT_MQTT_* environment variables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hilbot.driver.teleop.publisher import TeleopPublisher
    from hilbot.driver.teleop.settings import TeleopSettings
    from hilbot.driver.teleop.url import BrokerUrl

DEFAULT_URL = "mqtt://127.0.0.1:1883"
DISCOVERY_S = 2.0  # [s] to wait for retained status messages when --robot is omitted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot teleop`` options."""
    parser.add_argument(
        "--mqtt", default=DEFAULT_URL, metavar="URL", help=f"broker (default {DEFAULT_URL})"
    )
    parser.add_argument("--robot", help="robot name (default: the one robot online)")
    parser.add_argument("--prefix", help="topic prefix (default hilbot/<robot>)")
    parser.add_argument("--chain", help="chain to move (default: the robot's first chain)")
    parser.add_argument(
        "--pattern", choices=("circle", "figure8", "jog"), default="circle", help="default circle"
    )
    parser.add_argument("--radius", type=float, default=0.03, metavar="M", help="default 0.03")
    parser.add_argument("--period", type=float, default=4.0, metavar="S", help="default 4 s")
    parser.add_argument("--plane", choices=("xy", "yz", "xz"), default="yz", help="default yz")
    parser.add_argument("--rate", type=float, default=50.0, metavar="HZ", help="default 50 Hz")
    parser.add_argument("--step", type=float, default=0.005, metavar="M", help="jog step")
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    parser.add_argument(
        "--no-enable", action="store_true", help="do not send 'enable' before moving"
    )


def run(args: argparse.Namespace) -> int:
    """Publish until Ctrl+C or --duration; 1 when the robot or broker cannot be found."""
    from hilbot.driver.teleop.errors import TeleopError

    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 0
    except (TeleopError, TimeoutError, ValueError, RuntimeError) as exc:
        print(f"hilbot teleop: {exc}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace) -> int:
    import aiomqtt

    from hilbot.driver.teleop.demo import jog, play_pattern
    from hilbot.driver.teleop.patterns import Pattern, Plane
    from hilbot.driver.teleop.publisher import TeleopPublisher
    from hilbot.driver.teleop.settings import TeleopSettings
    from hilbot.driver.teleop.url import parse_broker_url

    url = parse_broker_url(args.mqtt)
    settings = TeleopSettings().with_environment()
    try:
        prefix = args.prefix or f"hilbot/{args.robot or await _discover(url, settings)}"
        async with TeleopPublisher(url, prefix, settings=settings) as publisher:
            chain = args.chain or await _first_chain(publisher)
            if args.pattern == "jog":
                await jog(publisher, chain, step=args.step, rate_hz=args.rate)
                return 0
            sent = await play_pattern(
                publisher,
                chain,
                Pattern(args.pattern),
                radius=args.radius,
                period_s=args.period,
                rate_hz=args.rate,
                plane=Plane(args.plane),
                duration_s=args.duration,
                arm=not args.no_enable,
            )
            print(f"published {sent} targets to {prefix}/target/{chain}")
    except aiomqtt.MqttError as exc:
        raise RuntimeError(f"broker {url}: {exc} (is `hilbot run` up?)") from exc
    return 0


async def _first_chain(publisher: TeleopPublisher) -> str:
    await publisher.wait_until(lambda p: p.state is not None, timeout=5.0)
    assert publisher.state is not None
    chains = list(publisher.state.get("chains", {}))
    if not chains:
        raise ValueError(f"the robot on {publisher.topics.prefix} reports no chains")
    return str(chains[0])


async def _discover(url: BrokerUrl, settings: TeleopSettings) -> str:
    """The name of the one robot whose retained ``status`` says online."""
    from hilbot.driver.teleop.client import MqttClient

    password = settings.password.get_secret_value() if settings.password else None
    online: set[str] = set()
    async with MqttClient(
        url.host,
        url.port,
        username=url.username or settings.username,
        password=url.password or password,
    ) as client:
        await client.subscribe("hilbot/+/status")
        try:
            async with asyncio.timeout(DISCOVERY_S):
                async for message in client.messages:
                    name = message.topic.value.split("/")[1]
                    status = json.loads(message.payload) if message.payload else {}
                    if isinstance(status, dict) and status.get("online"):
                        online.add(name)
                    else:
                        online.discard(name)
        except TimeoutError:
            pass
    if len(online) != 1:
        found = ", ".join(sorted(online)) or "none"
        raise ValueError(f"robots online on {url}: {found}; choose one with --robot NAME")
    return online.pop()
