"""Drive a follower arm from a leader arm: the leader's joints become the follower's targets.

The leader is read at its rate with torque off (a light hold on its trigger if its
config's ``lead.hold`` says so); each reading, mapped by the leader config's ``lead``
section (follower joint names, scale, offset, the gripper range), is published on the
follower's ``joints/target`` MQTT topic. The follower's safety layer stays last: its
limits and max delta apply, and when the leader stops publishing its watchdog holds it.

With ``--mqtt URL`` only the leader runs here, publishing to a follower on that broker
(``hilbot run FOLLOWER --enable`` elsewhere). Without it the follower runs in this
process too, on its embedded broker. ``--backend virtual --demo wave`` runs both on
virtual buses, the scripted hand waving the leader.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import sys
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from hilbot.driver.commands.failures import (
    EXIT_BAD_INPUT,
    message_of,
    port_problem,
    positive_hz,
    positive_seconds,
    reason_of,
)
from hilbot.driver.dataset import options as dataset_options
from hilbot.driver.progress import Progress
from hilbot.driver.runtime.backends import HARDWARE, backend_name

if TYPE_CHECKING:
    from hilbot.driver.calibration.apply import Calibrated
    from hilbot.driver.lead.rejections import FollowerRejections, Rejected
    from hilbot.driver.runtime.config import RobotConfig

STATUS_PERIOD = 0.25  # [s]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot lead`` options."""
    parser.add_argument("leader", help="the leader arm's config (a YAML file or a shipped name)")
    parser.add_argument(
        "--to", metavar="FOLLOWER", help="the follower's config (default lead.follower)"
    )
    parser.add_argument(
        "--backend",
        type=backend_name,
        choices=(HARDWARE, "virtual"),
        default=HARDWARE,
        help="the leader's bus: hardware (default: the real bus; `dynamixel` is its old name) "
        "or a virtual bus (with --demo)",
    )
    parser.add_argument(
        "--follower-backend",
        type=backend_name,
        choices=("sim", "virtual", HARDWARE),
        help="the follower's backend when it runs here (default: the same as --backend)",
    )
    parser.add_argument(
        "--mqtt",
        metavar="URL",
        help="publish to a follower on this broker instead of running it here",
    )
    parser.add_argument(
        "--leader-port",
        metavar="PORT",
        help="--backend hardware: the leader's serial port, overriding its config's",
    )
    parser.add_argument(
        "--follower-port",
        metavar="PORT",
        help="the follower's serial port when it runs here on the hardware backend, "
        "overriding its config's",
    )
    parser.add_argument(
        "--demo",
        choices=("wave", "sweep"),
        help="--backend virtual: the scripted hand moves the leader",
    )
    parser.add_argument(
        "--rate",
        type=positive_hz,
        metavar="HZ",
        help="leader rate (default lead.rate_hz or its rate_hz)",
    )
    parser.add_argument(
        "--duration", type=positive_seconds, metavar="S", help="stop after S seconds"
    )
    parser.add_argument("--no-status", action="store_true", help="no live status line")
    dataset_options.add_arguments(parser)


def _problem(args: argparse.Namespace) -> str | None:
    if args.dataset is not None and args.mqtt is not None:
        return "--dataset records the follower run here; with --mqtt it runs elsewhere"
    dataset = dataset_options.problem(args)
    if dataset is not None:
        return dataset
    if args.demo is not None and args.backend != "virtual":
        return "--demo moves a virtual leader: add --backend virtual"
    if args.mqtt is not None and args.follower_backend is not None:
        return "--follower-backend is for a follower run here; with --mqtt it runs elsewhere"
    if args.leader_port is not None and args.backend != HARDWARE:
        return (
            f"--leader-port is for --backend hardware; the {args.backend} leader opens no "
            "serial port of yours (drop --leader-port, or add --backend hardware)"
        )
    if args.follower_port is not None:
        if args.mqtt is not None:
            return "--follower-port is for a follower run here; with --mqtt it runs elsewhere"
        if _follower_kind(args) != HARDWARE:
            return (
                f"--follower-port is for a follower on the hardware backend, not "
                f"{_follower_kind(args)} (add --follower-backend hardware)"
            )
    return None


def with_port(config: RobotConfig, port: str | None, option: str) -> RobotConfig:
    """``config`` on serial ``port`` (``None``: as it is); ``option`` names it in errors.

    Raises:
        DriverError: a robot of several buses (which one would it be?).
    """
    from hilbot.driver.runtime.errors import DriverError

    if port is None:
        return config
    if len(config.buses) != 1:
        raise DriverError(f"{option} needs a single-bus robot; {config.name} has several buses")
    bus = config.buses[0].model_copy(update={"port": port})
    return config.model_copy(update={"buses": (bus,)})


def run(args: argparse.Namespace) -> int:
    """Lead until Ctrl+C or ``--duration``; returns the exit code."""
    from hilbot.driver.calibration.apply import load_calibrated
    from hilbot.driver.lead.mapping import LeadMap
    from hilbot.driver.runtime.config import load_config
    from hilbot.driver.runtime.errors import DriverError
    from hilbot.hal.errors import HalError, PortError

    problem = _problem(args)
    if problem is not None:
        print(f"hilbot lead: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        leader = with_port(load_config(args.leader), args.leader_port, "--leader-port")
        name = args.to or (leader.lead.follower if leader.lead is not None else None)
        if name is None:
            raise DriverError(
                f"{leader.name} names no follower (lead.follower): give --to FOLLOWER"
            )
        follower = with_port(load_config(name), args.follower_port, "--follower-port")
        mapping = LeadMap(leader, follower)
        if args.mqtt is not None:
            from hilbot.driver.teleop.client import parse_broker_url

            parse_broker_url(args.mqtt)
        local = None
        if args.mqtt is None:
            local = load_calibrated(
                follower, _follower_kind(args), source=name, port=args.follower_port
            )
        arms = _Arms(
            load_calibrated(leader, args.backend, source=args.leader, port=args.leader_port),
            follower,
            local,
        )
        recording = None
        if args.dataset is not None and local is not None:
            recording = dataset_options.open_writer(
                args, local.config, local.calibration, local.bus_config
            )
    except (DriverError, HalError, ValueError) as exc:
        print(f"hilbot lead: {message_of(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return asyncio.run(_lead(args, arms, mapping, recording))
    except PortError as exc:
        print(f"hilbot lead: {_port_problem(args, arms, exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    # any other expected error (a port, the broker, a bus) is one line from hilbot's main


def _follower_kind(args: argparse.Namespace) -> str:
    return str(args.follower_backend or args.backend)


#: What to do about a port lead cannot open.
LEAD_PORT_FIX = (
    "give the right one with --leader-port / --follower-port, or set it in the arm's "
    "config (`hilbot scan --port PORT` checks that servos answer there)"
)


def _port_problem(args: argparse.Namespace, arms: _Arms, exc: Any) -> str:
    """The one line for a port that cannot be opened, naming the config setting that gave it."""
    given = {args.leader_port: "--leader-port", args.follower_port: "--follower-port"}
    origin = given.get(exc.port)
    arms_here = [("leader", args.leader, arms.leader)]
    if arms.local is not None:
        lead = arms.leader.bus_config.lead
        named = args.to or (lead.follower if lead is not None else None)
        arms_here.append(("follower", named or arms.follower.name, arms.local))
    for role, source, arm in arms_here:
        for i, bus in enumerate(arm.config.buses):
            if origin is None and bus.port == exc.port:
                origin = f"buses[{i}].port of the {role} config {source}"
    return port_problem(exc.port, reason_of(exc), origin, LEAD_PORT_FIX)


class _Arms(NamedTuple):
    """The leader with its calibration, the follower's config, and the follower run here."""

    leader: Calibrated
    follower: RobotConfig
    local: Calibrated | None  # the follower with its calibration; None: elsewhere (--mqtt)


async def _lead(args: argparse.Namespace, arms: _Arms, mapping: Any, recording: Any = None) -> int:
    from hilbot.driver.calibration.apply import CalibrationMismatch
    from hilbot.driver.lead.latency import LeadLatency
    from hilbot.driver.lead.leader import lead, prepare_leader
    from hilbot.driver.lead.rejections import FollowerRejections
    from hilbot.driver.lead.session import follower as follower_session
    from hilbot.driver.runtime.backends import build_backend
    from hilbot.driver.teleop.publisher import TeleopPublisher

    leader, follower = arms.leader.bus_config, arms.follower
    hand = ["--hand", args.demo] if args.demo is not None else []
    hand += arms.leader.mount_args()  # a virtual leader assembled as it was calibrated
    rate = args.rate or (
        leader.lead.rate_hz if leader.lead and leader.lead.rate_hz else leader.rate_hz
    )
    stack = contextlib.AsyncExitStack()
    async with stack:
        runtime = latency = None
        try:
            # Each arm's calibration is checked on its first reading before anything is
            # enabled: the leader's, then the follower's while it is disarmed (as run does).
            lbackend = await stack.enter_async_context(
                build_backend(
                    arms.leader.config,
                    args.backend,
                    sim_bus_args=hand,
                    **arms.leader.backend_options(),
                )
            )
            await stack.enter_async_context(lbackend)
            if arms.leader.calibration is not None:
                arms.leader.check_fresh(await lbackend.read())
            if arms.local is None:
                url = args.mqtt
            else:
                kind = _follower_kind(args)
                fbackend = await stack.enter_async_context(
                    build_backend(
                        arms.local.config,
                        kind,
                        sim_bus_args=arms.local.mount_args(),
                        **arms.local.backend_options(),
                    )
                )
                latency = LeadLatency()
                runtime, url = await stack.enter_async_context(
                    follower_session(
                        arms.local.config, fbackend, check=arms.local.check_fresh, latency=latency
                    )
                )
        except CalibrationMismatch as exc:  # stale: nothing enabled, torque off on the way out
            print(f"hilbot lead: {message_of(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        await prepare_leader(lbackend, mapping)
        prefix = follower.teleop.topic_prefix(follower.name)
        publisher = await stack.enter_async_context(
            TeleopPublisher(url, prefix, settings=follower.teleop, sender=f"lead-{leader.name}")
        )
        status = Progress(1, enabled=not args.no_status and sys.stderr.isatty())
        rejections = FollowerRejections(publisher, on_first=functools.partial(_warn, status))
        sent = [0]

        def count(read_time: float, targets: dict[str, float]) -> None:
            sent[0] += 1
            rejections.update(sent[0])
            if latency is not None:
                latency.published(read_time, targets)

        started = time.monotonic()
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(lead(lbackend, mapping, publisher, rate, on_publish=count))
        ]
        if status.enabled:
            tasks.append(
                asyncio.create_task(_status(status, sent, runtime, mapping, rejections, started))
            )
        if recording is not None:  # the session ends when the episodes are recorded
            tasks.append(asyncio.create_task(dataset_options.record(args, runtime, *recording)))
        interrupted = False
        try:
            # the lead and status tasks end only by an error; the recording when it is done
            await asyncio.wait(tasks, timeout=args.duration, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # Ctrl+C: the summary still, then the interrupt
            interrupted = True
        finally:
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            status.close()
        elapsed = time.monotonic() - started
        for result in results:
            if isinstance(result, Exception):
                raise result
        if not interrupted:
            await rejections.settle(sent[0])  # the follower's word on the last targets too
        summary = _summary(sent[0], elapsed, runtime, mapping, rejections, final=True)
        timing = None if latency is None else latency.summary()
        print(summary if timing is None else f"{summary}; {timing}", flush=True)
        if interrupted:
            raise asyncio.CancelledError  # asyncio.run turns it into KeyboardInterrupt: 130
    return 0


def _warn(status: Progress, rejected: Rejected) -> None:
    """Say once, above the status line, that the follower rejects what the leader sends."""
    status.clear_line()
    print(
        f"hilbot lead: the follower rejects the leader's targets ({rejected.reason}): "
        f"{rejected.detail}",
        file=sys.stderr,
        flush=True,
    )


def tracking_error(runtime: Any, mapping: Any) -> float | None:
    """Largest |follower command - follower measured| over the led joints [rad or m]."""
    state = runtime.state() if runtime is not None else None
    if state is None or state.joints is None:
        return None
    measured = state.joints.positions()
    return float(max(abs(state.command[j] - measured[j]) for j in mapping.follower_joints))


async def _status(
    line: Progress,
    sent: list[int],
    runtime: Any,
    mapping: Any,
    rejections: FollowerRejections,
    started: float,
) -> None:
    while True:
        await asyncio.sleep(STATUS_PERIOD)
        line.show(_summary(sent[0], time.monotonic() - started, runtime, mapping, rejections))


def _summary(
    sent: int,
    elapsed: float,
    runtime: Any,
    mapping: Any,
    rejections: FollowerRejections,
    *,
    final: bool = False,
) -> str:
    """``published N targets (R/s)``, the follower's rejections, the local follower's state.

    The final line also names the first rejection's detail (the live line stays short).
    """
    text = f"published {sent} targets ({sent / max(elapsed, 1e-9):.0f}/s)"
    rejected = rejections.count(sent)
    if rejected:
        text += f", {rejected} rejected by the follower"
        if final and rejections.first is not None:
            text += f": {rejections.first.detail}"
    if runtime is None:
        return text
    state = runtime.state()
    error = tracking_error(runtime, mapping)
    hold = " watchdog-hold" if state.watchdog_tripped else ""
    lag = "" if error is None else f", follower within {error:.3f} rad of its command"
    return f"{text}; follower {state.mode.value}{hold}{lag}"
