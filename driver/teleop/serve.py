"""``serve``: attach MQTT teleop to a running runtime (the seam ``hilbot run`` calls)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from hilbot import _compat_asyncio as aio
from hilbot._compat import BaseExceptionGroup
from hilbot.driver.teleop.bridge import TeleopBridge, TeleopRuntime
from hilbot.driver.teleop.broker import EmbeddedBroker
from hilbot.driver.teleop.client import parse_broker_url
from hilbot.driver.teleop.demo import play_pattern
from hilbot.driver.teleop.errors import first_teleop_error
from hilbot.driver.teleop.instance import Instance
from hilbot.driver.teleop.lease import DEFAULT_TIMEOUT_S
from hilbot.driver.teleop.link import serve_isolated
from hilbot.driver.teleop.patterns import Pattern
from hilbot.driver.teleop.publisher import TeleopPublisher
from hilbot.driver.teleop.settings import TeleopSettings


async def serve(
    runtime: TeleopRuntime,
    settings: TeleopSettings,
    url: str | None,
    *,
    robot_name: str,
    logger: logging.Logger | None = None,
    demo: Pattern | str | None = None,
    demo_chain: str | None = None,
    ready: asyncio.Future[Any] | None = None,
    isolate: bool = True,
    takeover: bool = False,
) -> None:
    """Serve MQTT teleop for ``runtime`` until cancelled.

    With ``url=None`` an embedded broker (amqtt, MQTT 3.1.1) is started on
    ``settings.embedded_host``:``settings.embedded_port`` (127.0.0.1:1883 by
    default), requiring the settings' login if one is set; otherwise the bridge connects to
    ``url`` (``mqtt://host:port`` or ``mqtts://host:port``) and keeps
    reconnecting with jittered backoff. ``HILBOT_MQTT_*`` environment
    variables override ``settings``.

    By default (``isolate=True``) all MQTT I/O, and the embedded broker, run in
    a worker process, so a flood of messages costs that process CPU and not
    the control loop; the control process receives at most one batch of the
    newest targets per millisecond. ``isolate=False`` runs everything in this
    event loop (lower latency by a pipe hop, but no protection from floods).

    ``hilbot run`` calls it beside the runtime, in the same event loop::

        async with Runtime(config, backend) as runtime:
            async with asyncio.TaskGroup() as group:
                group.create_task(
                    serve(runtime, config.teleop, args.mqtt, robot_name=config.name,
                          demo="circle" if demo else None)
                )
                ...  # status line; cancel the task to stop

    Args:
        runtime: the running runtime.
        settings: the config's ``teleop`` section.
        url: broker URL, or None for the embedded broker.
        robot_name: names the default prefix ``hilbot/<robot_name>``.
        logger: where to log; ``hilbot.driver.teleop`` by default.
        demo: also publish this pattern (``"circle"`` or ``"figure8"``) through
            the broker from this process, arming the robot first: what the
            README's main job shows. None publishes nothing.
        demo_chain: the chain the demo moves (default: the first chain).
        ready: resolved once connected and subscribed, with the
            :class:`~hilbot.driver.teleop.link.TeleopLink` (isolated) or the
            :class:`~hilbot.driver.teleop.bridge.TeleopBridge`; both have
            ``url``, ``topics``, ``counters`` and ``connected``.
        isolate: run MQTT in a worker process (the default) or in this loop.
        takeover: go online even if another driver is online under the same topics
            (it then stops); without it, that refuses with :class:`NameTaken`.

    Raises:
        BrokerUrlError: ``url`` is malformed.
        EmbeddedBrokerError: the embedded broker could not listen.
        BrokerUnreachable: the broker cannot be reached, or refused the login.
        NameTaken: another driver is online under this robot's topics.
        TakenOver: another driver took this robot's topics over (``--takeover``).
        TeleopError: the worker process could not start serving.
    """
    settings = _with_lease_timeout(settings.with_environment(), runtime)
    instance = Instance(takeover=takeover)
    log = logger if logger is not None else logging.getLogger("hilbot.driver.teleop")
    if url is not None:
        parse_broker_url(url)  # fail here, in the caller's process, on a bad URL
    pattern = _demo_pattern(demo)
    chain = demo_chain if demo_chain is not None else next(iter(runtime.chains), None)
    if pattern is not None and chain is None:
        raise ValueError("the demo needs a chain, and this robot has none")
    try:
        await _serve(
            runtime, settings, url, robot_name, log, pattern, chain, ready, isolate, instance
        )
    except BaseExceptionGroup as group:
        # One error for the caller (hilbot run prints it as one line), not a group.
        error = first_teleop_error(group)
        if error is None:
            raise
        raise error from None


async def _serve(
    runtime: TeleopRuntime,
    settings: TeleopSettings,
    url: str | None,
    robot_name: str,
    log: logging.Logger,
    pattern: Pattern | None,
    chain: str | None,
    ready: asyncio.Future[Any] | None,
    isolate: bool,
    instance: Instance,
) -> None:
    connected: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    async with aio.TaskGroup() as group:
        if isolate:
            group.create_task(
                serve_isolated(
                    runtime,
                    settings,
                    url,
                    robot_name=robot_name,
                    logger=log,
                    ready=connected,
                    instance=instance,
                ),
                name="teleop-worker",
            )
        else:
            group.create_task(
                serve_in_process(
                    runtime,
                    settings,
                    url,
                    robot_name=robot_name,
                    logger=log,
                    ready=connected,
                    instance=instance,
                ),
                name="teleop-bridge",
            )
        link = await connected
        if ready is not None and not ready.done():
            ready.set_result(link)
        if pattern is not None and chain is not None:
            group.create_task(
                _demo(link, settings, chain, pattern, log, sender="demo"), name="teleop-demo"
            )


async def serve_in_process(
    runtime: TeleopRuntime,
    settings: TeleopSettings,
    url: str | None,
    *,
    robot_name: str,
    logger: logging.Logger,
    ready: asyncio.Future[Any] | None = None,
    instance: Instance | None = None,
) -> None:
    """Run the broker bridge (and the embedded broker if ``url`` is None) in this loop."""
    if url is not None:
        bridge = TeleopBridge(
            runtime, settings, url, robot_name=robot_name, logger=logger, instance=instance
        )
        await _run_bridge(bridge, ready)
        return
    users = {}
    if settings.username is not None and settings.password is not None:
        users[settings.username] = settings.password.get_secret_value()
    async with EmbeddedBroker(
        settings.embedded_host,
        settings.embedded_port,
        logger=logger,
        users=users if settings.password_file is None else None,
        password_file=settings.password_file,
    ) as broker:
        bridge = TeleopBridge(
            runtime, settings, broker.url, robot_name=robot_name, logger=logger, instance=instance
        )
        await _run_bridge(bridge, ready)


async def _run_bridge(bridge: TeleopBridge, ready: asyncio.Future[Any] | None) -> None:
    async with aio.TaskGroup() as group:
        group.create_task(bridge.run(), name="teleop-bridge")
        await bridge.connected.wait()
        if ready is not None and not ready.done():
            ready.set_result(bridge)


def _with_lease_timeout(settings: TeleopSettings, runtime: TeleopRuntime) -> TeleopSettings:
    """``settings`` with ``lease_timeout_s`` set: the robot's watchdog timeout unless given."""
    if settings.lease_timeout_s is not None:
        return settings
    safety = getattr(getattr(runtime, "config", None), "safety", None)
    timeout = getattr(safety, "watchdog_timeout", None)
    return settings.model_copy(update={"lease_timeout_s": timeout or DEFAULT_TIMEOUT_S})


def _demo_pattern(demo: Pattern | str | None) -> Pattern | None:
    if demo is None:
        return None
    pattern = Pattern(demo)
    if pattern is Pattern.JOG:
        raise ValueError(
            "the in-process demo draws 'circle' or 'figure8'; jog with `hilbot teleop`"
        )
    return pattern


async def _demo(
    link: Any,
    settings: TeleopSettings,
    chain: str,
    pattern: Pattern,
    logger: logging.Logger,
    *,
    sender: str,
) -> None:
    async with TeleopPublisher(
        link.url, link.topics.prefix, settings=settings, sender=sender, logger=logger
    ) as publisher:
        await play_pattern(publisher, chain, pattern, logger=logger)
