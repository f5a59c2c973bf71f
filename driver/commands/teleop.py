"""Publish teleop targets over MQTT: a circle or a figure-eight for a chain, or keyboard jogging.

Connects to the broker of a running ``hilbot run`` (its embedded broker on
127.0.0.1:1883 by default), reads the chain's present end-effector position
from the robot's ``state`` topic, arms the robot (unless --no-enable) and
publishes targets around it until Ctrl+C or --duration. With --robot omitted,
the one robot online on the broker is used. Credentials and TLS come from the
HILBOT_MQTT_* environment variables.

On a terminal a status line shows what is being sent: pattern, chain, rate, the number
of targets and the last one, and the robot's mode as its state reports it. A lost broker
is reconnected with backoff (the line says so; targets are dropped meanwhile, and the
robot's watchdog holds it); in jog the e-stop key keeps sending until the robot confirms. Options a
pattern does not use are refused (--step is for jog; --radius, --period, --plane,
--duration and --no-enable are for circle and figure8).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hilbot import _compat_asyncio as aio
from hilbot.driver.commands.failures import (
    EXIT_BAD_INPUT,
    positive_hz,
    positive_number,
    positive_seconds,
)
from hilbot.driver.progress import Progress
from hilbot.driver.teleop.publisher import TeleopPublisher

if TYPE_CHECKING:
    from hilbot.driver.teleop.client import BrokerUrl
    from hilbot.driver.teleop.settings import TeleopSettings

DEFAULT_URL = "mqtt://127.0.0.1:1883"
DISCOVERY_S = 2.0  # [s] to wait for retained status messages when --robot is omitted
STATUS_PERIOD = 0.25  # [s] between status line refreshes
#: Defaults of the pattern options; they are None on the command line until resolved, so
#: that an option the pattern does not use can be told from one left at its default.
PATTERN_DEFAULTS: dict[str, Any] = {"radius": 0.03, "period": 4.0, "plane": "yz"}
JOG_DEFAULTS: dict[str, Any] = {"step": 0.005}


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
    parser.add_argument(
        "--radius", type=positive_number, metavar="M", help="circle/figure8 size (default 0.03)"
    )
    parser.add_argument(
        "--period", type=positive_seconds, metavar="S", help="time per loop (default 4 s)"
    )
    parser.add_argument(
        "--plane", choices=("xy", "yz", "xz"), help="plane of the curve (default yz)"
    )
    parser.add_argument(
        "--rate", type=positive_hz, default=50.0, metavar="HZ", help="default 50 Hz"
    )
    parser.add_argument(
        "--step", type=positive_number, metavar="M", help="jog step (default 0.005 m)"
    )
    parser.add_argument(
        "--duration", type=positive_seconds, metavar="S", help="stop after S seconds"
    )
    parser.add_argument(
        "--no-enable", action="store_true", help="do not send 'enable' before moving"
    )


def run(args: argparse.Namespace) -> int:
    """Publish until Ctrl+C or --duration; 1 when the robot or broker cannot be found."""
    from hilbot.driver.teleop.errors import TeleopError

    problem = option_problem(args)
    if problem is not None:
        print(f"hilbot teleop: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 0
    except (TeleopError, TimeoutError, ValueError, RuntimeError) as exc:
        print(f"hilbot teleop: {exc}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace) -> int:
    import aiomqtt

    from hilbot.driver.teleop.client import parse_broker_url
    from hilbot.driver.teleop.publisher import Pattern, Plane, jog, play_pattern
    from hilbot.driver.teleop.settings import TeleopSettings

    url = parse_broker_url(args.mqtt)
    settings = TeleopSettings().with_environment()
    try:
        prefix = args.prefix or f"hilbot/{args.robot or await _discover(url, settings)}"
        async with ShownPublisher(url, prefix, settings=settings) as publisher:
            chain = args.chain or await _first_chain(publisher)
            if args.pattern == "jog":  # jog draws its own target line
                await jog(publisher, chain, step=args.step, rate_hz=args.rate)
                return 0
            status = Progress(1, hz=1.0 / STATUS_PERIOD)
            shown = asyncio.create_task(_status_line(publisher, args, chain, status))
            try:
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
            finally:
                shown.cancel()
                status.close()
            print(f"published {sent} targets to {prefix}/target/{chain}")
    except aiomqtt.MqttError as exc:
        raise RuntimeError(f"broker {url}: {exc} (is `hilbot run` up?)") from exc
    return 0


def option_problem(args: argparse.Namespace) -> str | None:
    """Refuse options the pattern does not use; fill in the defaults of those it does."""
    jogging = args.pattern == "jog"
    used, unused = (JOG_DEFAULTS, PATTERN_DEFAULTS) if jogging else (PATTERN_DEFAULTS, JOG_DEFAULTS)
    given = [f"--{name}" for name in unused if getattr(args, name, None) is not None]
    if jogging:  # jog runs until q and never arms the robot
        given += ["--duration"] * (args.duration is not None) + ["--no-enable"] * args.no_enable
    if given:
        kind = "keyboard jogging (--pattern jog)" if jogging else f"--pattern {args.pattern}"
        return f"{', '.join(given)}: not used by {kind}; drop them"
    for name, default in used.items():
        if getattr(args, name, None) is None:
            setattr(args, name, default)
    return None


class ShownPublisher(TeleopPublisher):
    """A :class:`TeleopPublisher` that remembers what it sent, for the status line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent = 0
        self.last_target: list[float] | None = None

    async def target(
        self,
        chain: str,
        position: npt.ArrayLike,
        orientation: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
    ) -> int:
        """Publish a pose target (see ``TeleopPublisher.target``) and count it."""
        seq = await super().target(chain, position, orientation, ttl=ttl)
        self.sent += 1
        self.last_target = np.asarray(position, dtype=float).tolist()
        return seq


def status_text(publisher: ShownPublisher, args: argparse.Namespace, chain: str) -> str:
    """One status line: what is being sent, and the robot's mode."""
    last = publisher.last_target
    where = "none yet" if last is None else "[" + ", ".join(f"{v:+.3f}" for v in last) + "] m"
    mode = (publisher.state or {}).get("mode", "unknown")
    link = "" if publisher.connected.is_set() else "; broker lost, reconnecting"
    return (
        f"{args.pattern} r={args.radius:g} m in {args.plane} on {chain!r} at {args.rate:g} Hz: "
        f"{publisher.sent} targets, last {where}; robot {mode}{link}"
    )


async def _status_line(
    publisher: ShownPublisher, args: argparse.Namespace, chain: str, line: Progress
) -> None:
    """Redraw the status line; log records clear it first (they never run into it)."""
    while True:
        await asyncio.sleep(STATUS_PERIOD)
        line.show(status_text(publisher, args, chain))


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
            async with aio.timeout(DISCOVERY_S):
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
