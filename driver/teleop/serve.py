"""``serve``: attach MQTT teleop to a running runtime (the seam ``hilbot run`` calls).

Teleop runs in this process (:func:`serve_in_process`) or, as ``hilbot run`` does, in a
worker process (:func:`serve_isolated`): this module holds the control process's side of
that worker (start it, feed it state, apply its targets) and the framing of the socket
pair between them; :mod:`~hilbot.driver.teleop.worker` is the worker's side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pickle
import socket
import struct
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import Any

from hilbot import _compat_asyncio as aio
from hilbot._compat import BaseExceptionGroup
from hilbot.driver.child_python import python_command, wrong_package
from hilbot.driver.runtime.errors import DriverError
from hilbot.driver.runtime.state import Command
from hilbot.driver.teleop.bridge import (
    DEFAULT_TIMEOUT_S,
    Instance,
    TeleopBridge,
    TeleopCounters,
    TeleopRuntime,
    report_failure,
)
from hilbot.driver.teleop.broker import EmbeddedBroker
from hilbot.driver.teleop.client import Backoff, BrokerUrl, parse_broker_url
from hilbot.driver.teleop.errors import TeleopError, first_teleop_error
from hilbot.driver.teleop.messages import Topics, refusal_reason, state_body
from hilbot.driver.teleop.publisher import Pattern, TeleopPublisher, play_pattern
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
            :class:`TeleopLink` (isolated) or the
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


# The control process's side of the teleop worker: start it, feed it state, apply its targets.

#: Seconds a stopping worker gets to say goodbye (``status`` offline) before it is killed.
STOP_TIMEOUT_S = 3.0
#: Seconds a starting worker gets to say which ``hilbot`` it loaded (imports on a busy host).
HELLO_TIMEOUT_S = 60.0


class TeleopLink:
    """What the control process knows of its teleop worker.

    Attributes:
        topics: the robot's topics.
        url: the broker the worker is connected to (the embedded one's real port too).
        counters: the worker's bridge counters, refreshed ten times a second.
        connected: set while the worker is connected to the broker.
        pid: the worker's process id.
        restarts: how often the worker was restarted after dying.
        target_frames: target batches applied to the runtime; the worker sends at
            most one per millisecond however fast targets arrive.
    """

    def __init__(self, topics: Topics) -> None:
        self.topics = topics
        self.url: BrokerUrl | None = None
        self.counters = TeleopCounters()
        self.connected = asyncio.Event()
        self.pid: int | None = None
        self.restarts = 0
        self.target_frames = 0


async def serve_isolated(
    runtime: TeleopRuntime,
    settings: TeleopSettings,
    url: str | None,
    *,
    robot_name: str,
    logger: logging.Logger,
    ready: asyncio.Future[Any] | None = None,
    instance: Any = None,
) -> None:
    """Run teleop in a worker process until cancelled; restart the worker if it dies.

    The worker holds the MQTT connection (and the embedded broker when ``url``
    is None). While it is down the runtime gets no targets, so its watchdog
    holds the robot. ``ready`` is resolved with the :class:`TeleopLink`. Every worker
    gets the same ``instance`` (:class:`~hilbot.driver.teleop.bridge.Instance`).

    Raises:
        TeleopError: the worker could not start serving (bad URL, busy port).
    """
    link = TeleopLink(Topics(settings.topic_prefix(robot_name)))
    backoff = Backoff(settings.reconnect_min_s, settings.reconnect_max_s)
    while True:
        code = await _run_worker(runtime, settings, url, robot_name, logger, link, ready, instance)
        link.connected.clear()
        link.restarts += 1
        delay = backoff.next_delay()
        logger.error("the teleop worker exited (code %s); restarting in %.2f s", code, delay)
        await asyncio.sleep(delay)


async def _run_worker(
    runtime: TeleopRuntime,
    settings: TeleopSettings,
    url: str | None,
    robot_name: str,
    logger: logging.Logger,
    link: TeleopLink,
    ready: asyncio.Future[Any] | None,
    instance: Any = None,
) -> int | None:
    ours, theirs = socket.socketpair()
    process = await asyncio.create_subprocess_exec(
        *python_command("hilbot.driver.teleop.worker", str(theirs.fileno())),
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    link.pid = process.pid
    reader, writer = await asyncio.open_connection(sock=ours)
    try:
        # The settings hold the broker's password: only for a worker running our hilbot.
        await _verify_worker(reader, process)
    except BaseException:
        writer.close()  # it sees the channel close and exits; killed if it does not
        try:
            # asyncio.TimeoutError: Python 3.10's wait_for raises it, not TimeoutError.
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        raise
    init = {
        "settings": settings,
        "url": url,
        "robot_name": robot_name,
        "chains": tuple(runtime.chains),
        "joint_names": tuple(runtime.joint_names),
        "log_level": logger.getEffectiveLevel(),
        "instance": instance,
    }
    writer.write(pack(("init", init)) + pack(("state", state_body(runtime.state()))))
    push = asyncio.get_running_loop().create_task(
        _push_state(runtime, settings, writer), name="teleop-state-push"
    )
    try:
        await _pump(runtime, reader, writer, link, ready, logger)
    finally:
        push.cancel()
        writer.close()
        with contextlib.suppress(ProcessLookupError, TimeoutError):
            async with aio.timeout(STOP_TIMEOUT_S):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode


async def _verify_worker(reader: asyncio.StreamReader, process: Any) -> None:
    """Read the worker's hello line; raise unless it runs the ``hilbot`` this process runs.

    The line is plain JSON, not a pickle: nothing from an unverified child is unpickled.

    Raises:
        TeleopError: the worker exited, said nothing in time, or loaded another hilbot.
    """
    try:
        line = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT_S)
    except (TimeoutError, asyncio.TimeoutError, ValueError, ConnectionError):  # 3.10: the latter
        line = b""
    try:
        hello = json.loads(line)
    except ValueError:
        hello = None
    if not isinstance(hello, dict) or "hilbot" not in hello:
        code = process.returncode
        raise TeleopError(
            "the teleop worker did not start"
            + ("" if code is None else f" (exit code {code})")
            + "; it was sent no credentials"
        )
    problem = wrong_package(hello["hilbot"])
    if problem is not None:
        raise TeleopError(f"refusing the teleop worker: {problem}; it was sent no credentials")


async def _push_state(
    runtime: TeleopRuntime, settings: TeleopSettings, writer: asyncio.StreamWriter
) -> None:
    """Send the worker a state snapshot at the telemetry rate."""
    period = 1.0 / settings.state_rate_hz
    while True:
        await asyncio.sleep(period)
        writer.write(pack(("state", state_body(runtime.state()))))
        await writer.drain()


async def _pump(
    runtime: TeleopRuntime,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    link: TeleopLink,
    ready: asyncio.Future[Any] | None,
    logger: logging.Logger,
) -> None:
    """Apply the worker's frames until it closes the channel.

    Each command runs in a task of its own and always ends with one ``result`` frame
    (see :func:`_command`); the worker sends at most one e-stop at a time and its other
    commands one after the other, so these tasks stay few. They end with the channel.
    """
    commands: set[asyncio.Task[None]] = set()
    try:
        await _frames(runtime, reader, writer, link, ready, logger, commands)
    finally:
        for task in commands:
            task.cancel()


async def _frames(
    runtime: TeleopRuntime,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    link: TeleopLink,
    ready: asyncio.Future[Any] | None,
    logger: logging.Logger,
    commands: set[asyncio.Task[None]],
) -> None:
    while True:
        try:
            frame = await receive(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        match frame:
            case ("target", chain, target, topic, seq, stamp):
                link.target_frames += 1
                _apply(writer, topic, seq, partial(runtime.set_target, stamp=stamp), chain, target)
            case ("joints", positions, topic, seq, stamp):
                link.target_frames += 1
                setter = partial(runtime.set_joint_targets, stamp=stamp)
                _apply(writer, topic, seq, setter, positions)
            case ("command", ident, name):
                task = asyncio.get_running_loop().create_task(
                    _command(runtime, writer, ident, name, logger), name=f"teleop-command-{name}"
                )
                commands.add(task)
                task.add_done_callback(commands.discard)
            case ("ready", url):
                link.url = parse_broker_url(url)
                link.connected.set()
                if ready is not None and not ready.done():
                    ready.set_result(link)
            case ("counters", counters, connected):
                link.counters = _counters(counters)
                if connected:
                    link.connected.set()
                else:
                    link.connected.clear()
            case ("failed", reason):
                raise TeleopError(reason)
            case _:
                raise TeleopError(f"teleop worker sent an unexpected frame {frame[0]!r}")


def _apply(
    writer: asyncio.StreamWriter, topic: str, seq: int | None, setter: Any, *args: Any
) -> None:
    try:
        setter(*args)
    except (DriverError, ValueError, KeyError) as exc:
        writer.write(pack(("reject", topic, seq, str(exc), refusal_reason(exc).value)))


async def _command(
    runtime: TeleopRuntime,
    writer: asyncio.StreamWriter,
    ident: int,
    name: str,
    logger: logging.Logger,
) -> None:
    """Run one command of the worker's; answer with exactly one ``result`` frame.

    ``None`` on success, else one line naming the command and the reason, whatever
    was raised (a refusal, a bus error, a bug: that one is logged with its traceback).
    """
    refusal: str | None = None
    try:
        await runtime.command(Command(name))
    except Exception as exc:
        refusal = report_failure(name, exc, logger)
    if not writer.transport.is_closing():  # the worker is gone: nobody waits for it
        writer.write(pack(("result", ident, refusal)))


def _counters(data: Mapping[str, Any]) -> TeleopCounters:
    fields = {k: v for k, v in data.items() if k != "rejected_total"}
    fields["rejected"] = Counter(fields.get("rejected", {}))
    return TeleopCounters(**fields)


# Framed messages between the control process and the teleop worker (a socket pair).
#
# Each frame is a 4-byte big-endian length and a pickle. Both ends are this
# package's own code in processes of the same user, so pickle is safe here; it
# never carries anything that came from the network undecoded.

_HEADER = struct.Struct(">I")
#: Frames larger than this are a bug (state snapshots are a few kB).
MAX_FRAME = 16 * 1024 * 1024


def pack(message: tuple[Any, ...]) -> bytes:
    """One frame holding ``message``."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def receive(reader: asyncio.StreamReader) -> tuple[Any, ...]:
    """Read one frame; raises ``asyncio.IncompleteReadError`` at end of stream."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"teleop channel frame of {size} bytes: the peer is broken")
    message = pickle.loads(await reader.readexactly(size))
    if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
        raise ValueError(f"teleop channel: unexpected frame {type(message).__name__}")
    return message
