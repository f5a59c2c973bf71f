"""The control process's side of the teleop worker: start it, feed it state, apply its targets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import Any

from hilbot import _compat_asyncio as aio
from hilbot.driver.child_python import python_command, wrong_package
from hilbot.driver.errors import DriverError
from hilbot.driver.state import Command
from hilbot.driver.teleop.bridge import TeleopCounters, TeleopRuntime
from hilbot.driver.teleop.channel import pack, receive
from hilbot.driver.teleop.client import Backoff, BrokerUrl, parse_broker_url
from hilbot.driver.teleop.command_errors import report_failure
from hilbot.driver.teleop.errors import TeleopError
from hilbot.driver.teleop.messages import Topics, refusal_reason
from hilbot.driver.teleop.settings import TeleopSettings
from hilbot.driver.teleop.telemetry import state_body

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
    gets the same ``instance`` (:class:`~hilbot.driver.teleop.instance.Instance`).

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
