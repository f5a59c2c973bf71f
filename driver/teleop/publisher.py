"""A teleop client: publishes targets and commands, follows ``state`` and ``status``.

Used by ``hilbot teleop``, ``hilbot lead``, the ``hilbot run`` demo and the tests;
it is an ordinary MQTT client and knows nothing of the runtime. A lost broker is
reconnected with jittered backoff (one warning when lost, one when back);
meanwhile targets are dropped (the robot's watchdog holds it) and commands raise
:class:`~hilbot.driver.teleop.errors.NotConnected`.

The demos that drive it are here too: the circle and figure-eight patterns (pure) and
the publishers that draw them with a chain or jog it from the keyboard.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import secrets
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, TextIO

import aiomqtt
import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from hilbot import _compat_asyncio as aio
from hilbot._compat import Self, StrEnum
from hilbot.driver.teleop.bridge import NO_DELAY
from hilbot.driver.teleop.client import Backoff, BrokerUrl, MqttClient, parse_broker_url
from hilbot.driver.teleop.errors import NotConnected
from hilbot.driver.teleop.messages import Topics
from hilbot.driver.teleop.settings import TeleopSettings


class TeleopPublisher:
    """Publish to a robot's teleop topics and keep its latest ``state`` and ``status``.

    Args:
        url: broker URL.
        prefix: the robot's topic prefix (``hilbot/<robot>``).
        settings: credentials, TLS and QoS (defaults when None).
        sender: the ``sender`` field of every message; a fresh random id by
            default, so a restarted publisher is a new stream for ``seq``.
        default_ttl_s: ``ttl`` [s] put on targets (each target is stamped).
        logger: where to log.
        wall_clock: Unix time source [s] for ``stamp``.

    Example::

        async with TeleopPublisher("mqtt://127.0.0.1", "hilbot/omx") as pub:
            await pub.command("enable")
            await pub.target("arm", [0.2, 0.0, 0.15])
    """

    def __init__(
        self,
        url: str | BrokerUrl,
        prefix: str,
        *,
        settings: TeleopSettings | None = None,
        sender: str | None = None,
        default_ttl_s: float = 0.5,
        logger: logging.Logger | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = parse_broker_url(url) if isinstance(url, str) else url
        self.topics = Topics(prefix)
        self.settings = settings if settings is not None else TeleopSettings()
        self.sender = sender if sender is not None else uuid.uuid4().hex[:12]
        self.default_ttl_s = default_ttl_s
        #: The newest ``state``, ``status`` and ``error`` payloads, decoded.
        self.state: dict[str, Any] | None = None
        self.status: dict[str, Any] | None = None
        self.errors: list[dict[str, Any]] = []
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self._wall = wall_clock
        self._seq: dict[str, int] = {}
        self._client: aiomqtt.Client | None = None
        self._reader: asyncio.Task[None] | None = None
        self._updated = asyncio.Condition()
        #: Set while connected to the broker (cleared while reconnecting).
        self.connected = asyncio.Event()
        #: Times the connection was lost and made again.
        self.reconnects = 0
        #: Targets not sent because the broker was unreachable.
        self.dropped = 0

    async def __aenter__(self) -> Self:
        client = await self._connect()  # the first attempt's failure is the caller's
        self._reader = asyncio.get_running_loop().create_task(self._keep(client))
        return self

    async def _connect(self) -> aiomqtt.Client:
        """A new connection, subscribed to ``state``, ``status`` and ``error``."""
        settings = self.settings
        password = settings.password.get_secret_value() if settings.password else None
        tls: dict[str, Any] = {}
        if self.url.tls:
            tls["tls_params"] = aiomqtt.TLSParameters(
                ca_certs=str(settings.tls.ca_file) if settings.tls.ca_file else None,
                certfile=str(settings.tls.cert_file) if settings.tls.cert_file else None,
                keyfile=str(settings.tls.key_file) if settings.tls.key_file else None,
            )
            tls["tls_insecure"] = settings.tls.insecure
        client = MqttClient(
            self.url.host,
            self.url.port,
            username=self.url.username or settings.username,
            password=self.url.password or password,
            # Random, never the sender (which every message carries): a client id anyone
            # can read is one anyone can connect with, and the broker drops its owner.
            identifier=f"hilbot-teleop-{secrets.token_hex(8)}",
            keepalive=settings.keepalive_s,
            timeout=5.0,
            logger=self._logger,
            socket_options=NO_DELAY,
            **tls,
        )
        await client.__aenter__()
        try:
            await client.subscribe(
                [(self.topics.state, 0), (self.topics.status, 1), (self.topics.error, 0)]
            )
        except BaseException:
            with contextlib.suppress(aiomqtt.MqttError):
                await client.__aexit__(None, None, None)
            raise
        self._client = client
        self.connected.set()
        return client

    async def _keep(self, client: aiomqtt.Client) -> None:
        """Read messages; when the broker is lost, say so and reconnect with backoff."""
        backoff = Backoff(self.settings.reconnect_min_s, self.settings.reconnect_max_s)
        while True:
            try:
                await self._read(client)
                reason = "the connection closed"
            except aiomqtt.MqttError as exc:
                reason = str(exc)
            self._client = None
            self.connected.clear()
            with contextlib.suppress(aiomqtt.MqttError):
                await client.__aexit__(None, None, None)
            self._logger.warning(
                "lost the MQTT broker %s (%s); reconnecting with backoff", self.url, reason
            )
            while True:
                await asyncio.sleep(backoff.next_delay())
                try:
                    client = await self._connect()
                except aiomqtt.MqttError as exc:
                    self._logger.debug("reconnecting to %s: %s", self.url, exc)
                    continue
                break
            backoff.reset()
            self.reconnects += 1
            self._logger.warning("reconnected to the MQTT broker %s", self.url)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                await reader
        client, self._client = self._client, None
        self.connected.clear()
        if client is not None:
            with contextlib.suppress(aiomqtt.MqttError):
                await client.__aexit__(exc_type, exc, tb)

    async def _read(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            try:
                data = json.loads(_as_text(message.payload))
            except ValueError:
                continue
            topic = message.topic.value
            if topic == self.topics.state:
                self.state = data
            elif topic == self.topics.status:
                self.status = data
            elif topic == self.topics.error:
                self.errors.append(data)
                del self.errors[:-1000]  # keep the newest thousand
            async with self._updated:
                self._updated.notify_all()

    @property
    def client(self) -> aiomqtt.Client:
        """The connected MQTT client.

        Raises:
            RuntimeError: outside ``async with``.
            NotConnected: the broker is lost; reconnecting.
        """
        if self._client is None:
            if self._reader is not None:
                raise NotConnected(str(self.url))
            raise RuntimeError("TeleopPublisher is not connected: use it in 'async with'")
        return self._client

    def next_seq(self, topic: str) -> int:
        """Return the next ``seq`` for ``topic`` (from 1)."""
        seq = self._seq.get(topic, 0) + 1
        self._seq[topic] = seq
        return seq

    async def wait_until(
        self, predicate: Callable[[TeleopPublisher], bool], timeout: float = 5.0
    ) -> None:
        """Wait until ``predicate(self)`` holds after some message arrived.

        Raises:
            TimeoutError: it did not hold within ``timeout`` [s].
        """
        async with aio.timeout(timeout), self._updated:
            await self._updated.wait_for(lambda: predicate(self))

    async def chain_position(self, chain: str, timeout: float = 5.0) -> NDArray[np.float64]:
        """The chain's end-effector position (3,) [m] from the newest ``state``.

        Raises:
            TimeoutError: no ``state`` with that chain arrived within ``timeout`` [s].
        """

        def has_chain(pub: TeleopPublisher) -> bool:
            return pub.state is not None and chain in pub.state.get("chains", {})

        try:
            await self.wait_until(has_chain, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no state for chain {chain!r} on {self.topics.state} within {timeout} s: "
                "is `hilbot run` up, with that chain, on this broker and prefix?"
            ) from None
        assert self.state is not None
        return np.asarray(self.state["chains"][chain]["position"], dtype=np.float64)

    async def command(self, name: str) -> int:
        """Publish a command (QoS 1); returns its ``seq``.

        Raises:
            NotConnected: the broker is lost (the publisher is reconnecting).
        """
        return await self._publish(self.topics.cmd, {"command": name}, qos=1, stamp=False)

    async def estop(
        self, *, confirm_s: float = 1.0, on_retry: Callable[[str], None] | None = None
    ) -> None:
        """Publish ``estop`` until the robot's ``state`` reports it e-stopped.

        While the broker is lost, waits for the reconnection; an e-stop sent before the
        robot's own connection is back could reach nobody, so it is sent again every
        ``confirm_s`` [s] until the state confirms it. Returns only then (cancel to give
        up). ``on_retry`` is told why each attempt did not stop the robot.
        """

        def estopped(publisher: TeleopPublisher) -> bool:
            return publisher.state is not None and publisher.state.get("mode") == "estopped"

        while True:
            try:
                await self.command("estop")
            except NotConnected as exc:
                if on_retry is not None:
                    on_retry(str(exc))
                await self.connected.wait()
                continue
            try:
                await asyncio.wait_for(self._until(estopped), confirm_s)
                return
            except (TimeoutError, asyncio.TimeoutError):  # 3.10's wait_for raises the latter
                if on_retry is not None:
                    on_retry(f"the robot did not report it e-stopped within {confirm_s:g} s")

    async def _until(self, predicate: Callable[[TeleopPublisher], bool]) -> None:
        async with self._updated:
            await self._updated.wait_for(lambda: predicate(self))

    async def target(
        self,
        chain: str,
        position: npt.ArrayLike,
        orientation: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
    ) -> int:
        """Publish a pose target for ``chain``; returns its ``seq``.

        While the broker is lost, the target is dropped (counted in :attr:`dropped`).
        """
        body: dict[str, Any] = {"position": np.asarray(position, dtype=float).tolist()}
        if orientation is not None:
            body["orientation"] = dict(orientation)
        return await self._publish(self.topics.target(chain), body, ttl=ttl)

    async def joint_target(
        self, positions: Mapping[str, float], *, ttl: float | None = None
    ) -> int:
        """Publish joint targets [rad or m]; returns its ``seq`` (dropped while disconnected)."""
        body = {"positions": {k: float(v) for k, v in positions.items()}}
        return await self._publish(self.topics.joints, body, ttl=ttl)

    async def _publish(
        self,
        topic: str,
        body: dict[str, Any],
        *,
        qos: int | None = None,
        stamp: bool = True,
        ttl: float | None = None,
    ) -> int:
        seq = self.next_seq(topic)
        message = {"seq": seq, "sender": self.sender, **body}
        if stamp:
            message["stamp"] = self._wall()
            message["ttl"] = ttl if ttl is not None else self.default_ttl_s
        try:
            await self.client.publish(
                topic,
                json.dumps(message, separators=(",", ":")),
                qos=self.settings.qos if qos is None else qos,
            )
        except (NotConnected, aiomqtt.MqttError) as exc:
            if stamp:  # a target: dropped (the next one replaces it anyway)
                self.dropped += 1
                return seq
            if isinstance(exc, NotConnected):
                raise
            raise NotConnected(str(self.url), str(exc)) from exc
        return seq


def _as_text(payload: object) -> str | bytes:
    if isinstance(payload, bytes | str):
        return payload
    return bytes(payload) if isinstance(payload, bytearray) else str(payload)


# Demo motion patterns: end-effector offsets for a circle and a figure-eight (pure).


class Pattern(StrEnum):
    """What ``hilbot teleop`` publishes."""

    CIRCLE = "circle"
    FIGURE8 = "figure8"
    JOG = "jog"


class Plane(StrEnum):
    """The plane a pattern is drawn in, in the chain's source frame."""

    XY = "xy"
    YZ = "yz"
    XZ = "xz"


_AXES = {Plane.XY: (0, 1), Plane.YZ: (1, 2), Plane.XZ: (0, 2)}


def pattern_offset(
    pattern: Pattern, phase: float, radius: float, plane: Plane = Plane.YZ
) -> NDArray[np.float64]:
    """Offset (3,) [m] from the start point at ``phase`` [rad] along the pattern.

    Both curves pass through the start point at phase 0 (so the arm does not
    jump there) and are periodic in 2π.

    - circle: radius ``radius``, centred ``radius`` away from the start.
    - figure-eight: a lemniscate of Gerono, ``radius`` wide on each side.

    Raises:
        ValueError: for ``Pattern.JOG`` (it has no path) or a negative radius.
    """
    if radius < 0.0:
        raise ValueError(f"radius must be >= 0 m, got {radius}")
    if pattern is Pattern.CIRCLE:
        u, v = radius * (math.cos(phase) - 1.0), radius * math.sin(phase)
    elif pattern is Pattern.FIGURE8:
        u, v = radius * math.sin(phase), radius * math.sin(phase) * math.cos(phase)
    else:
        raise ValueError(f"the {pattern.value} pattern has no path; it follows the keyboard")
    offset = np.zeros(3)
    first, second = _AXES[plane]
    offset[first], offset[second] = u, v
    return offset


#: Keyboard jogging: key -> unit direction in the chain's source frame.
JOG_KEYS: dict[str, tuple[float, float, float]] = {
    "w": (1.0, 0.0, 0.0),
    "s": (-1.0, 0.0, 0.0),
    "a": (0.0, 1.0, 0.0),
    "d": (0.0, -1.0, 0.0),
    "r": (0.0, 0.0, 1.0),
    "f": (0.0, 0.0, -1.0),
}
#: Keyboard jogging: key -> command name.
#: The e-stop and reset keys are those of ``hilbot run``'s terminal (space or e e-stops,
#: c resets): one key never means two things.
JOG_COMMANDS: dict[str, str] = {
    "n": "enable",
    "x": "disable",
    " ": "estop",
    "e": "estop",
    "c": "reset",
    "h": "home",
}
JOG_HELP = (
    "jog: w/s ±x, a/d ±y, r/f ±z; n enable, x disable, space or e e-stop, c reset, h home, q quit"
)


def jog_step(key: str, step: float) -> NDArray[np.float64] | None:
    """Displacement (3,) [m] for a jog key, or None if the key does not jog."""
    direction = JOG_KEYS.get(key.lower())
    return None if direction is None else np.asarray(direction) * step


# Demo publishers: draw a circle or a figure-eight with a chain, or jog it from the keyboard.

_LOGGER = logging.getLogger(__name__)


async def enable(publisher: TeleopPublisher, timeout: float = 3.0) -> str | None:
    """Send ``enable`` and wait until ``state`` reports the robot armed.

    Returns:
        None once it is armed; else why not: the robot's refusal of this ``enable`` from
        its ``error`` topic (a latched e-stop, a stale calibration, a fault), or the mode
        its ``state`` still reports after ``timeout`` [s].
    """
    seq = await publisher.command("enable")

    def refusal() -> str | None:
        for error in reversed(publisher.errors):
            if error.get("topic") == publisher.topics.cmd and error.get("seq") == seq:
                return str(error.get("detail") or error.get("reason") or "refused")
        return None

    def settled(p: TeleopPublisher) -> bool:
        armed = p.state is not None and p.state.get("mode") == "armed"
        return armed or refusal() is not None

    try:
        await publisher.wait_until(settled, timeout)
    except TimeoutError:
        mode = publisher.state.get("mode") if publisher.state is not None else None
        return f"its state still reports {mode!r} after {timeout:g} s"
    return refusal()


async def play_pattern(
    publisher: TeleopPublisher,
    chain: str,
    pattern: Pattern,
    *,
    radius: float = 0.03,
    period_s: float = 4.0,
    rate_hz: float = 50.0,
    plane: Plane = Plane.YZ,
    duration_s: float | None = None,
    arm: bool = True,
    logger: logging.Logger | None = None,
) -> int:
    """Publish ``pattern`` around the chain's present end-effector position.

    The curve starts at the present position (read from ``state``), so the arm
    does not jump. Targets carry ``stamp`` and ``ttl``; if this publisher stops,
    the runtime's watchdog makes the robot hold.

    Args:
        publisher: a connected publisher for the robot.
        chain: the chain to move.
        pattern: circle or figure-eight.
        radius: size of the pattern [m].
        period_s: time for one loop [s].
        rate_hz: publish rate [Hz].
        plane: the plane of the curve, in the chain's source frame.
        duration_s: stop after this long [s]; None runs until cancelled.
        arm: send ``enable`` first.
        logger: where to log.

    Returns:
        The number of targets published.
    """
    log = logger if logger is not None else _LOGGER
    if period_s <= 0.0 or rate_hz <= 0.0:
        raise ValueError(f"period_s and rate_hz must be > 0, got {period_s} and {rate_hz}")
    start = await publisher.chain_position(chain)
    refused = await enable(publisher) if arm else None
    if refused is not None:
        log.warning("the robot is not armed: %s; publishing anyway", refused)
    log.info(
        "teleop demo: %s of %.3f m on %r around %s", pattern.value, radius, chain, start.round(3)
    )
    sent = 0
    began = time.monotonic()
    for t in _ticks(rate_hz, duration_s):
        await _sleep_until(t)
        phase = 2.0 * math.pi * (t - began) / period_s
        await publisher.target(chain, start + pattern_offset(pattern, phase, radius, plane))
        sent += 1
    return sent


async def _sleep_until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))


def _ticks(rate_hz: float, duration_s: float | None) -> Iterator[float]:
    """Monotonic deadlines at ``rate_hz`` (sync generator; the caller sleeps)."""
    period = 1.0 / rate_hz
    start = time.monotonic()
    k = 0
    while duration_s is None or k * period < duration_s:
        yield start + k * period
        k += 1


async def jog(
    publisher: TeleopPublisher,
    chain: str,
    *,
    step: float = 0.005,
    rate_hz: float = 50.0,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> None:
    """Jog ``chain`` from the keyboard (a TTY); returns on ``q``.

    The target starts at the present position; each key press moves it by
    ``step`` [m]. It is re-published at ``rate_hz`` so the watchdog stays fed
    while a key is held or not.

    The e-stop key (space) works while the broker is lost: it says the e-stop was
    not delivered and keeps sending it until the robot's state reports it
    e-stopped, or the operator quits (which then says it never was).
    """
    try:
        import termios
        import tty
    except ImportError:
        raise RuntimeError(
            f"keyboard jogging needs a POSIX terminal (termios); not available on {sys.platform}"
        ) from None

    stream = stdin if stdin is not None else sys.stdin
    console = out if out is not None else sys.stderr
    if not stream.isatty():
        raise RuntimeError("keyboard jogging needs a terminal (stdin is not a TTY)")
    target = await publisher.chain_position(chain)
    keys: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    loop.add_reader(fd, lambda: keys.put_nowait(stream.read(1)))
    print(JOG_HELP, file=console)
    estops: list[asyncio.Task[None]] = []
    try:
        await _jog_loop(publisher, chain, target, keys, step, 1.0 / rate_hz, console, estops)
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        for task in estops:
            if not task.done():
                task.cancel()
                print(
                    "\nquitting: the e-stop was NOT delivered (the robot never confirmed it)",
                    file=console,
                    flush=True,
                )


async def _jog_command(
    publisher: TeleopPublisher, name: str, console: TextIO, estops: list[asyncio.Task[None]]
) -> None:
    """Send a jog key's command; an e-stop is sent until the robot confirms it."""
    if name != "estop":
        try:
            await publisher.command(name)
        except NotConnected as exc:
            print(f"\r{name} not sent: {exc}", file=console, flush=True)
        return
    if not any(not task.done() for task in estops):
        estops[:] = [asyncio.get_running_loop().create_task(_estop(publisher, console))]


async def _estop(publisher: TeleopPublisher, console: TextIO) -> None:
    told = False

    def not_yet(why: str) -> None:
        nonlocal told
        if not told:
            print(
                f"\re-stop NOT delivered: {why}; sending it until the robot confirms it (q quits)",
                file=console,
                flush=True,
            )
            told = True

    await publisher.estop(on_retry=not_yet)
    if told:
        print("\re-stop delivered: the robot reports it e-stopped", file=console, flush=True)


async def _jog_loop(
    publisher: TeleopPublisher,
    chain: str,
    target: np.ndarray,
    keys: asyncio.Queue[str],
    step: float,
    period: float,
    console: TextIO,
    estops: list[asyncio.Task[None]],
) -> None:
    next_publish = time.monotonic()
    while True:
        if time.monotonic() >= next_publish:
            await publisher.target(chain, target)
            next_publish = time.monotonic() + period
        try:
            key = await asyncio.wait_for(keys.get(), max(0.0, next_publish - time.monotonic()))
        except (TimeoutError, asyncio.TimeoutError):  # 3.10's wait_for: the latter
            continue
        if key == "q":
            return
        if key in JOG_COMMANDS:
            await _jog_command(publisher, JOG_COMMANDS[key], console, estops)
            continue
        delta = jog_step(key, step)
        if delta is not None:
            target = target + delta
            next_publish = 0.0  # publish the move at once
            print(f"\rtarget {np.round(target, 3)}   ", end="", file=console, flush=True)
