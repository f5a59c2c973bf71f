"""``serve``: attach MQTT teleop to a running runtime (the seam ``hilbot run`` calls)."""

from __future__ import annotations

import asyncio
import logging

from hilbot.driver.teleop.bridge import TeleopBridge, TeleopRuntime
from hilbot.driver.teleop.broker import LOCALHOST, EmbeddedBroker
from hilbot.driver.teleop.demo import play_pattern
from hilbot.driver.teleop.patterns import Pattern
from hilbot.driver.teleop.publisher import TeleopPublisher
from hilbot.driver.teleop.settings import TeleopSettings
from hilbot.driver.teleop.url import BrokerUrl, parse_broker_url


async def serve(
    runtime: TeleopRuntime,
    settings: TeleopSettings,
    url: str | None,
    *,
    robot_name: str,
    logger: logging.Logger | None = None,
    demo: Pattern | str | None = None,
    demo_chain: str | None = None,
    ready: asyncio.Event | None = None,
) -> None:
    """Serve MQTT teleop for ``runtime`` until cancelled.

    With ``url=None`` an embedded broker (amqtt, MQTT 3.1.1) is started on
    127.0.0.1:``settings.embedded_port`` and the bridge connects to it;
    otherwise the bridge connects to ``url`` (``mqtt://host:port`` or
    ``mqtts://host:port``) and keeps reconnecting with jittered backoff.
    ``HILBOT_MQTT_*`` environment variables override ``settings``.

    ``hilbot run`` calls it beside the runtime, in the same event loop::

        async with Runtime(config, backend) as runtime:
            async with asyncio.TaskGroup() as group:
                group.create_task(
                    serve(runtime, config.teleop, args.mqtt, robot_name=config.name,
                          demo="circle" if args.demo else None)
                )
                ...  # status line; cancel the group to stop

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
        ready: set once the bridge is connected and subscribed.

    Raises:
        BrokerUrlError: ``url`` is malformed.
        EmbeddedBrokerError: the embedded broker could not listen.
    """
    settings = settings.with_environment()
    log = logger if logger is not None else logging.getLogger("hilbot.driver.teleop")
    if url is not None:
        await _serve(
            runtime, settings, parse_broker_url(url), robot_name, log, demo, demo_chain, ready
        )
        return
    async with EmbeddedBroker(LOCALHOST, settings.embedded_port, logger=log) as broker:
        target = parse_broker_url(broker.url)
        await _serve(runtime, settings, target, robot_name, log, demo, demo_chain, ready)


async def _serve(
    runtime: TeleopRuntime,
    settings: TeleopSettings,
    url: BrokerUrl,
    robot_name: str,
    logger: logging.Logger,
    demo: Pattern | str | None,
    demo_chain: str | None,
    ready: asyncio.Event | None,
) -> None:
    bridge = TeleopBridge(runtime, settings, url, robot_name=robot_name, logger=logger)
    pattern = Pattern(demo) if demo is not None else None
    if pattern is Pattern.JOG:
        raise ValueError(
            "the in-process demo draws 'circle' or 'figure8'; jog with `hilbot teleop`"
        )
    chain = demo_chain if demo_chain is not None else next(iter(runtime.chains), None)
    if pattern is not None and chain is None:
        raise ValueError("the demo needs a chain, and this robot has none")
    async with asyncio.TaskGroup() as group:
        group.create_task(bridge.run(), name="teleop-bridge")
        await bridge.connected.wait()
        if ready is not None:
            ready.set()
        if pattern is not None and chain is not None:
            group.create_task(
                _demo(url, settings, bridge, chain, pattern, logger), name="teleop-demo"
            )


async def _demo(
    url: BrokerUrl,
    settings: TeleopSettings,
    bridge: TeleopBridge,
    chain: str,
    pattern: Pattern,
    logger: logging.Logger,
) -> None:
    async with TeleopPublisher(
        url, bridge.topics.prefix, settings=settings, sender="demo", logger=logger
    ) as publisher:
        await play_pattern(publisher, chain, pattern, logger=logger)
