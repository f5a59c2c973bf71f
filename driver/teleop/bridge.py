"""The MQTT bridge: broker messages -> runtime targets and commands, runtime state -> telemetry.

The bridge is the only part of teleop that does I/O. It never blocks the
control loop: targets go into the runtime's latest-value slots
(``set_target`` only validates and stores), commands run in their own task,
and telemetry is published from a timer at ``state_rate_hz``.

Its rules, sans I/O, are here too: the inbox that hands each message on at once,
the freshness filter (``seq``, ``stamp``, ``ttl``), the operator lease, the
instance precedence (one driver per robot name) and the retained e-stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import secrets
import shlex
import socket
import ssl
import time
import uuid
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import aiomqtt
from aiomqtt import Message as RawMessage

from hilbot import _compat_asyncio as aio
from hilbot._compat import BaseExceptionGroup, split_group
from hilbot.driver.commands.failures import describe
from hilbot.driver.runtime.errors import DriverError
from hilbot.driver.runtime.state import Command
from hilbot.driver.teleop.client import Backoff, BrokerUrl, MqttClient, parse_broker_url
from hilbot.driver.teleop.errors import (
    BrokerUnreachable,
    NameTaken,
    TakenOver,
    TeleopError,
    first_teleop_error,
)
from hilbot.driver.teleop.messages import (
    CommandMessage,
    CommandName,
    Header,
    JointTarget,
    Message,
    MessageRejected,
    PoseTarget,
    Rejection,
    RejectReason,
    Topics,
    Vocabulary,
    encode,
    number_text,
    parse,
    refusal_reason,
    state_body,
    status_payload,
)
from hilbot.driver.teleop.settings import ENV_PASSWORD, TeleopSettings

# How a teleop command that failed is told: one line naming the command and the reason.
#
# Every command that arrives over MQTT ends with exactly one outcome, whatever the
# runtime raised: success, or this line on the ``error`` topic. An expected error (a
# refusal, a bus error: see :func:`hilbot.driver.commands.failures.describe`) is its
# message; anything else is a bug, told in one line too and logged with its traceback
# once, by whoever first catches it.


class CommandFailure(NamedTuple):
    """A failed command as the ``error`` topic tells it.

    Attributes:
        detail: one line, ``"<command>: <reason>"``.
        expected: a refusal or a bus error, not a bug.
    """

    detail: str
    expected: bool


def command_failure(command: str, exc: BaseException) -> CommandFailure:
    """The one line ``command`` failing with ``exc`` reports, and whether that was expected.

    ``ValueError`` (not a command) and ``RuntimeError`` (the runtime has stopped) are
    refusals too. A reason that already names the command (passed on by the teleop
    worker) is kept as it is.
    """
    failure = describe(exc)
    expected = failure is not None or isinstance(exc, ValueError | RuntimeError)
    text = failure.message if failure is not None else " ".join(str(exc).split())
    if failure is None and not isinstance(exc, ValueError | RuntimeError):
        text = f"internal error: {type(exc).__name__}: {text}" if text else type(exc).__name__
    if not text.startswith(f"{command}:"):
        text = f"{command}: {text or type(exc).__name__}"
    return CommandFailure(text, expected)


def report_failure(command: str, exc: BaseException, logger: logging.Logger) -> str:
    """:func:`command_failure`'s line, logged: a bug with its traceback (once), else at debug."""
    failure = command_failure(command, exc)
    if failure.expected:
        logger.debug("teleop command %s", failure.detail)
    else:
        logger.error("teleop command %s", failure.detail, exc_info=exc)
    return failure.detail


# The bridge's incoming-message queue: it hands each message on the moment it arrives.

#: Handles one raw message: ``(topic, payload, retained)``.
Handler = Callable[[str, bytes, bool], object]


class DispatchingQueue(asyncio.Queue[Any]):
    """An ``asyncio.Queue`` for aiomqtt that queues nothing: it handles each message at once.

    aiomqtt puts each incoming message with ``put_nowait`` from its socket
    callback; this one calls :meth:`handle` right there. The bridge parses and
    validates the message and, if valid, stores it in the runtime's
    latest-value slot before the loop can run another callback (a control
    cycle that is due would otherwise run first and the target wait a period),
    so every bad payload is reported however fast the next one follows, and
    conflation happens only among valid targets, in the runtime's slots (or the
    teleop worker's batch). Subclass with :func:`dispatching_queue`.
    """

    def handle(self, topic: str, payload: bytes, retained: bool) -> None:
        """Handle one message; nothing by default."""
        del topic, payload, retained

    def put_nowait(self, item: RawMessage) -> None:
        """Handle ``item`` now; it is never queued."""
        self.handle(item.topic.value, _payload_bytes(item.payload), item.retain)


def dispatching_queue(handler: Handler) -> type[DispatchingQueue]:
    """Return a :class:`DispatchingQueue` class whose ``handle`` calls ``handler``.

    aiomqtt takes the queue as a class (``Client(queue_type=...)``), hence the factory.
    """

    class _Queue(DispatchingQueue):
        def handle(self, topic: str, payload: bytes, retained: bool) -> None:
            handler(topic, payload, retained)

    return _Queue


def _payload_bytes(payload: Any) -> bytes:
    match payload:
        case bytes():
            return payload
        case bytearray():
            return bytes(payload)
        case str():
            return payload.encode()
        case None:
            return b""
    return str(payload).encode()


# Drop old, repeated and expired messages: ``seq`` per topic and sender, ``stamp``/``ttl``.


@dataclass(slots=True)
class _Last:
    seq: int
    at: float  # [s], monotonic


class FreshnessFilter:
    """Accept a message only if it is newer than the last one of its stream and not expired.

    A stream is a (topic, sender) pair. Its ``seq`` must grow; a lower or
    repeated one is dropped, unless the stream was silent for ``seq_reset_s``
    (a restarted sender starts again from 0). A message with a ``stamp`` older
    than its ``ttl`` (or ``default_ttl_s``) is dropped, and so is one stamped
    more than ``max_clock_skew_s`` in the future. At most ``max_streams``
    streams are remembered (least recently used first out), so a flood of
    made-up senders cannot grow memory.

    Args:
        default_ttl_s: lifetime [s] of a stamped message without ``ttl``.
        max_clock_skew_s: tolerated sender clock lead [s].
        seq_reset_s: silence [s] after which a stream's ``seq`` may restart.
        max_streams: number of streams remembered.
        wall_clock: Unix time source [s], compared with ``stamp``.
        monotonic: monotonic time source [s].
    """

    def __init__(
        self,
        *,
        default_ttl_s: float,
        max_clock_skew_s: float,
        seq_reset_s: float = 2.0,
        max_streams: int = 256,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._default_ttl = default_ttl_s
        self._skew = max_clock_skew_s
        self._reset = seq_reset_s
        self._max_streams = max_streams
        self._wall = wall_clock
        self._mono = monotonic
        self._streams: OrderedDict[tuple[str, str], _Last] = OrderedDict()

    def __len__(self) -> int:
        return len(self._streams)

    def check(self, topic: str, header: Header) -> None:
        """Record ``header`` as the newest of its stream, or raise.

        Raises:
            MessageRejected: with reason ``expired``, ``future_stamp`` or ``stale_seq``.
        """
        if header.stamp is not None:
            self._check_age(topic, header, header.stamp)
        if header.seq is not None:
            self._check_seq(topic, header, header.seq)

    def _check_age(self, topic: str, header: Header, stamp: float) -> None:
        age = self._wall() - stamp
        ttl = header.ttl if header.ttl is not None else self._default_ttl
        if age < -self._skew:
            raise MessageRejected(
                Rejection(
                    RejectReason.FUTURE_STAMP,
                    f"stamp is {_seconds(-age)} s in the future (tolerance {self._skew} s); "
                    "check the sender's clock",
                    topic,
                    header.seq,
                )
            )
        if age > ttl:
            raise MessageRejected(
                Rejection(
                    RejectReason.EXPIRED,
                    f"message is {_seconds(age)} s old, its ttl is {number_text(ttl)} s",
                    topic,
                    header.seq,
                )
            )

    def _check_seq(self, topic: str, header: Header, seq: int) -> None:
        key = (topic, header.sender)
        now = self._mono()
        last = self._streams.get(key)
        if last is not None and seq <= last.seq and now - last.at < self._reset:
            raise MessageRejected(
                Rejection(
                    RejectReason.STALE_SEQ,
                    f"seq {seq} is not newer than {last.seq}",
                    topic,
                    seq,
                )
            )
        if last is None:
            self._streams[key] = _Last(seq, now)
            if len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)
        else:
            last.seq, last.at = seq, now
            self._streams.move_to_end(key)


def _seconds(value: float) -> str:
    """A time span [s] for a detail: to the millisecond, or in 6 digits when huge."""
    return f"{value:.3f}" if abs(value) < 1e6 else f"{value:.6g}"


# The operator lease: one sender at a time moves and commands a robot, sans I/O.
#
# The first sender whose target or command is accepted while nobody holds the
# lease takes it (arming over MQTT is the usual way: the sender of ``enable``
# holds it). Its targets and commands pass; every other sender's are refused
# with the reason ``not_lease_holder``, except ``estop``, which anyone
# authorised may send. The lease ends when its holder sends ``disable`` or
# ``release``, or stays silent for ``timeout_s`` (the robot's watchdog timeout).
#
# ``sender`` is what each message says it is: the lease keeps two operators from
# fighting over one arm by accident. Who may publish at all is the broker's
# login and ACLs.

#: Lease timeout [s] of a robot whose target watchdog is off.
DEFAULT_TIMEOUT_S = 0.5


class Lease:
    """Who holds a robot's lease, and since when it was last heard from.

    Args:
        timeout_s: the holder's silence [s] after which the lease ends.
        clock: monotonic time source [s].
    """

    def __init__(
        self, timeout_s: float = DEFAULT_TIMEOUT_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not timeout_s > 0.0:
            raise ValueError(f"the lease timeout must be > 0 s, got {timeout_s}")
        self.timeout_s = timeout_s
        self._clock = clock
        self._holder: str | None = None
        self._heard = 0.0

    @property
    def holder(self) -> str | None:
        """The sender holding the lease, or None (also once its holder fell silent)."""
        if self._holder is not None and self._clock() - self._heard > self.timeout_s:
            self._holder = None
        return self._holder

    def admit(self, sender: str) -> bool:
        """Whether ``sender`` may act now; a free lease goes to it, the holder's is renewed."""
        holder = self.holder
        if holder is not None and holder != sender:
            return False
        self._holder = sender
        self._heard = self._clock()
        return True

    def end(self, sender: str) -> bool:
        """End the lease if ``sender`` holds it (``disable``, ``release``); whether it did."""
        if self.holder != sender:
            return False
        self._holder = None
        return True

    def refusal(self, sender: str) -> str:
        """Why ``sender`` is refused: one line naming the holder and how the lease ends."""
        return (
            f"the robot is leased to sender {self.holder!r}, not {sender!r}: it ends when "
            f"that sender sends 'disable' or 'release', or is silent for {self.timeout_s:g} s; "
            "'estop' is accepted from anyone"
        )


# Which driver answers to a robot's name: instance ids in ``status``, sans I/O.
#
# Each driver (``hilbot run``) picks a random instance id at start and puts it,
# with its start time, in every ``status`` and ``state`` payload and in its last
# will. At start it reads the retained ``status`` of its name: another instance
# online means another driver already answers there, and this one refuses to
# start unless told to take over (``--takeover``). While it runs it follows its
# own ``status`` topic: a status of its name saying offline (a will) is
# overwritten with its own again; one saying another instance is online ends the
# lesser of the two (see :meth:`Instance.outranks`).


def new_instance_id() -> str:
    """A fresh random instance id (16 hex digits), never derived from anything published."""
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class Seen:
    """A ``status`` payload as another driver (or a will) left it."""

    online: bool
    instance: str | None
    started: float
    takeover: bool

    @property
    def rank(self) -> tuple[bool, float, str]:
        """Precedence: a driver that took over, then the later start, then the larger id."""
        return (self.takeover, self.started, self.instance or "")


@dataclass(frozen=True, slots=True)
class Instance:
    """This driver: its id, its start time (Unix [s]) and whether it took over its name."""

    id: str = field(default_factory=new_instance_id)
    started: float = field(default_factory=time.time)
    takeover: bool = False

    @property
    def rank(self) -> tuple[bool, float, str]:
        """Precedence, as :attr:`Seen.rank`."""
        return (self.takeover, self.started, self.id)

    def outranks(self, other: Seen) -> bool:
        """Whether this driver keeps the name when ``other`` is online too.

        A driver started with ``--takeover`` outranks one that was not; among
        equals the later start wins (two drivers that started at the same time
        and both found the name free), then the larger id.
        """
        return self.rank > other.rank

    def fields(self) -> dict[str, Any]:
        """The ``instance``, ``started`` and ``takeover`` fields of a ``status`` payload."""
        return {"instance": self.id, "started": round(self.started, 6), "takeover": self.takeover}


def read_status(payload: bytes) -> Seen | None:
    """Decode a ``status`` payload; None for an empty (cleared) or unreadable one."""
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("online"), bool):
        return None
    instance = data.get("instance")
    started = data.get("started")
    return Seen(
        online=data["online"],
        instance=instance if isinstance(instance, str) else None,
        started=float(started) if isinstance(started, int | float) else 0.0,
        takeover=data.get("takeover") is True,
    )


# A retained e-stop on ``cmd``: what it is, and the one command that clears it.


@dataclass(frozen=True, slots=True)
class RetainedEstop:
    """A retained ``estop`` the broker handed the bridge on subscribing to ``cmd``.

    The broker hands it to every new subscriber, so it e-stops the robot at every
    start until someone publishes an empty retained message on the topic.

    Attributes:
        topic: the ``cmd`` topic it is retained on.
        url: the broker holding it.
        username: the login to clear it with, if the broker needs one.
        ca_file: the CA bundle of a TLS broker (None: the system's).
    """

    topic: str
    url: BrokerUrl
    username: str | None = None
    ca_file: str | None = None

    @property
    def clear_command(self) -> str:
        """The ``mosquitto_pub`` command that clears it (an empty retained message)."""
        words = ["mosquitto_pub", "-h", self.url.host, "-p", str(self.url.port)]
        if self.url.tls:
            words += ["--cafile", self.ca_file] if self.ca_file else ["--capath", "/etc/ssl/certs"]
        if self.username is not None:
            words += ["-u", self.username]
        words += ["-t", self.topic, "-r", "-n"]
        text = shlex.join(words)
        if self.username is not None:
            text += f' -P "${ENV_PASSWORD}"'
        return text

    def explain(self) -> str:
        """One line for the terminal."""
        return (
            f"a retained e-stop on {self.topic} (left on the broker by an earlier publish) "
            f"e-stops the robot at every start; clear it with: {self.clear_command} "
            "(then reset the robot)"
        )

    def as_json(self) -> dict[str, Any]:
        """The ``retained_estop`` field of the ``status`` payload."""
        return {"topic": self.topic, "clear": self.clear_command, "detail": self.explain()}


#: Error-topic messages per second; beyond that rejections are only counted.
ERROR_RATE_LIMIT = 50
#: Commands waiting to run; more are refused (e-stop never waits here).
COMMAND_QUEUE = 16
#: Seconds to wait for a publish before treating the broker as gone.
PUBLISH_TIMEOUT_S = 2.0
#: Socket options of every MQTT connection: no Nagle delay. paho leaves Nagle on, and a
#: small publish then waits for the ACK of the previous one, which the peer may delay by
#: up to 40 ms: 15-25 % of teleop targets took over 3 ms more to arrive.
NO_DELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)


class TeleopRuntime(Protocol):
    """The part of ``hilbot.driver.runtime.loop.Runtime`` the bridge uses."""

    @property
    def chains(self) -> Iterable[str]:
        """Names of the robot's IK chains."""
        ...

    @property
    def joint_names(self) -> Iterable[str]:
        """Names of the driven joints."""
        ...

    def set_target(self, chain: str, target: Any, *, stamp: float | None = None) -> None:
        """Store a pose target for ``chain`` (latest value wins)."""
        ...

    def set_joint_targets(
        self, positions: Mapping[str, float], *, stamp: float | None = None
    ) -> None:
        """Store joint targets (latest value wins)."""
        ...

    async def command(self, command: Any) -> Any:
        """Run a lifecycle command."""
        ...

    def state(self) -> Any:
        """Snapshot of joint state, poses, mode, faults and stats."""
        ...


@dataclass(slots=True)
class TeleopCounters:
    """What the bridge has done since it started; published in ``state.teleop``.

    ``received`` = ``accepted`` + rejected. ``conflated`` counts accepted
    targets that a newer one replaced before they left the teleop worker (in
    process, the runtime's latest-value slots conflate and it stays 0).
    """

    received: int = 0
    accepted: int = 0
    conflated: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    errors_suppressed: int = 0
    commands: int = 0
    connects: int = 0
    disconnects: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {
            "received": self.received,
            "accepted": self.accepted,
            "conflated": self.conflated,
            "rejected": dict(self.rejected),
            "rejected_total": sum(self.rejected.values()),
            "errors_suppressed": self.errors_suppressed,
            "commands": self.commands,
            "connects": self.connects,
            "disconnects": self.disconnects,
        }


def runtime_command(name: CommandName) -> Any:
    """Translate a teleop command into the runtime's ``Command`` member of the same name."""
    return Command(name.value)


class TeleopBridge:
    """Connects a runtime to an MQTT broker and keeps it connected.

    Two connections: one for targets (and telemetry), one that subscribes to
    ``cmd`` only, so that an e-stop never queues behind a flood of targets, in
    the broker's queue for this client or in this client's socket. A broker
    that cannot be reached (or refuses the login) at the first attempt raises
    :class:`~hilbot.driver.teleop.errors.BrokerUnreachable`; later losses are
    retried with jittered backoff.

    Args:
        runtime: the running ``Runtime`` (anything with the :class:`TeleopRuntime` methods).
        settings: teleop settings (apply :meth:`TeleopSettings.with_environment` first).
        url: broker URL or parsed :class:`BrokerUrl`.
        robot_name: names the default topic prefix ``hilbot/<robot_name>``.
        logger: where to log; ``hilbot.driver.teleop`` by default.
        wall_clock: Unix time source [s], for ``stamp`` checks and payloads.
        rng: random source of the reconnect jitter.
        commands: maps a teleop command to what ``runtime.command`` takes.
        instance: this driver's identity in ``status`` and ``state`` (a fresh random
            one by default); ``Instance(takeover=True)`` takes over a name another
            driver is online under.
    """

    def __init__(
        self,
        runtime: TeleopRuntime,
        settings: TeleopSettings,
        url: str | BrokerUrl,
        *,
        robot_name: str,
        logger: logging.Logger | None = None,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        commands: Callable[[CommandName], Any] = runtime_command,
        instance: Instance | None = None,
    ) -> None:
        self.runtime = runtime
        self.settings = settings
        self.url = parse_broker_url(url) if isinstance(url, str) else url
        self.topics = Topics(settings.topic_prefix(robot_name))
        self.counters = TeleopCounters()
        #: Set while both connections are up and subscribed; cleared when one drops.
        self.connected = asyncio.Event()
        #: The retained e-stop found on ``cmd``, or None.
        self.retained_estop: RetainedEstop | None = None
        self._up: dict[str, bool] = {"targets": False, "commands": False}
        self._links_up = asyncio.Event()
        self._command_client: aiomqtt.Client | None = None
        self._online = False  # the targets session has published status online
        self._ever_up: dict[str, bool] = {"targets": False, "commands": False}
        self._robot = robot_name
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self._wall = wall_clock
        self._rng = rng if rng is not None else random.Random()
        self._to_command = commands
        #: This driver's instance id, start time and takeover flag.
        self.instance = instance if instance is not None else Instance()
        #: Who may send targets and commands (see :class:`Lease`).
        self.lease = Lease(settings.lease_timeout_s or DEFAULT_TIMEOUT_S)
        self._lease_holder: str | None = None  # the holder last logged
        self._first_status = True  # the next status check is this driver's first
        self._seen_status: Seen | None = None  # the status read while connecting
        self._status_stale = False  # a will or another driver overwrote our status
        self._taken_over: TakenOver | None = None
        self._taken = asyncio.Event()
        fleet = settings.fleet_topic
        self._fleet: tuple[str, Vocabulary] | None = None
        if fleet is not None:
            self._fleet = (
                fleet,
                Vocabulary(
                    prefix=fleet.rsplit("/", 1)[0],
                    chains=frozenset(),
                    joints=frozenset(),
                    max_payload_bytes=settings.max_payload_bytes,
                ),
            )
        self._vocabulary = Vocabulary(
            prefix=self.topics.prefix,
            chains=frozenset(runtime.chains),
            joints=frozenset(runtime.joint_names),
            max_payload_bytes=settings.max_payload_bytes,
        )
        self._freshness = FreshnessFilter(
            default_ttl_s=settings.default_ttl_s,
            max_clock_skew_s=settings.max_clock_skew_s,
            wall_clock=wall_clock,
        )
        self._errors: deque[Rejection] = deque(maxlen=ERROR_RATE_LIMIT)
        self._errors_ready = asyncio.Event()
        self._commands: asyncio.Queue[CommandMessage] = asyncio.Queue(COMMAND_QUEUE)
        self._background: set[asyncio.Task[None]] = set()
        # The e-stop in flight (see _estop): one task runs it, and one more after it for
        # every e-stop that arrived once it had gone out, however many did.
        self._estop_running = False
        self._estop_sent = False
        self._estop_again: CommandMessage | None = None
        self._queue_type = dispatching_queue(self.handle)
        #: (topic, seq) of the message being dispatched, for runtimes that report later.
        self.current: tuple[str, int | None] = ("", None)

    # ---- connection lifecycle -------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, and reconnect with jittered backoff; returns only when cancelled.

        Commands run in their own task beside the connection, so a broker
        drop does not cut a running ``home`` short.
        """
        try:
            async with aio.TaskGroup() as group:
                group.create_task(self._run_commands(), name="teleop-commands")
                group.create_task(
                    self._connect_forever("targets", self._session), name="teleop-connection"
                )
                group.create_task(
                    self._connect_forever("commands", self._command_session),
                    name="teleop-command-connection",
                )
                group.create_task(self._watch_takeover(), name="teleop-takeover")
        except BaseExceptionGroup as group:  # except* TeleopError (Python 3.10 has no except*)
            teleop, rest = group.split(TeleopError)
            if teleop is None:
                raise
            error = first_teleop_error(teleop)
            assert error is not None
            if rest is not None:  # what else failed goes with it, as except* does
                raise BaseExceptionGroup("", [error, rest]) from None
            raise error from None

    async def _watch_takeover(self) -> None:
        await self._taken.wait()
        assert self._taken_over is not None
        raise self._taken_over

    async def _connect_forever(
        self, kind: str, session: Callable[[aiomqtt.Client], Coroutine[Any, Any, None]]
    ) -> None:
        backoff = Backoff(self.settings.reconnect_min_s, self.settings.reconnect_max_s, self._rng)
        while True:
            try:
                async with self._client(kind) as client:
                    if backoff.attempts:
                        self._logger.warning(
                            "reconnected to the MQTT broker %s (%s connection)", self.url, kind
                        )
                    backoff.reset()
                    if kind == "targets":
                        self.counters.connects += 1
                    await session(client)
            except BaseException as exc:  # except* aiomqtt.MqttError (3.10 has no except*)
                lost, rest = split_group(exc, aiomqtt.MqttError)
                if lost is None:
                    raise
                if rest is None:
                    self._lost(kind, lost.exceptions[0])
                else:  # as except* does: handle the MQTT part, then re-raise the rest
                    try:
                        self._lost(kind, lost.exceptions[0])
                    except BaseException as raised:
                        raise BaseExceptionGroup("", [raised, rest]) from None
                    raise rest from None
            delay = backoff.next_delay()
            self._logger.info("reconnecting to %s in %.2f s", self.url, delay)
            await asyncio.sleep(delay)

    def _mark(self, kind: str, up: bool) -> None:
        self._up[kind] = up
        if up:
            self._ever_up[kind] = True
        if kind == "targets" and not up:
            self._online = False
        if all(self._up.values()):
            self._links_up.set()
            if self._online:  # the command connection came back under a running session
                self.connected.set()
        else:
            self._links_up.clear()
            self.connected.clear()

    def _lost(self, kind: str, exc: BaseException) -> None:
        if not self._ever_up[kind]:
            # The first attempt: a wrong host, port or login is the user's to fix, now.
            raise BrokerUnreachable(str(self.url), str(exc))
        if self._up[kind]:
            if kind == "targets":
                self.counters.disconnects += 1
            self._logger.warning(
                "lost the MQTT broker %s (%s connection): %s; the robot holds", self.url, kind, exc
            )
        else:  # one warning when lost, one when back: each failed attempt only in debug
            self._logger.debug("cannot reach the MQTT broker %s: %s", self.url, exc)
        self._mark(kind, False)

    def _client(self, kind: str = "targets") -> aiomqtt.Client:
        settings = self.settings
        password = settings.password.get_secret_value() if settings.password else None
        tls: dict[str, Any] = {}
        if self.url.tls:
            tls["tls_params"] = aiomqtt.TLSParameters(
                ca_certs=str(settings.tls.ca_file) if settings.tls.ca_file else None,
                certfile=str(settings.tls.cert_file) if settings.tls.cert_file else None,
                keyfile=str(settings.tls.key_file) if settings.tls.key_file else None,
                cert_reqs=ssl.CERT_REQUIRED,
            )
            tls["tls_insecure"] = settings.tls.insecure
        offline = self._offline_status()
        identifier = settings.client_id or f"hilbot-{self._robot}-{uuid.uuid4().hex[:8]}"
        will = aiomqtt.Will(self.topics.status, offline, qos=1, retain=True)
        return MqttClient(
            self.url.host,
            self.url.port,
            username=self.url.username or settings.username,
            password=self.url.password or password,
            identifier=identifier if kind == "targets" else f"{identifier[:60]}-cmd",
            queue_type=self._queue_type,
            will=will if kind == "targets" else None,
            clean_session=True,
            keepalive=settings.keepalive_s,
            timeout=PUBLISH_TIMEOUT_S * 2,
            logger=self._logger,
            socket_options=NO_DELAY,
            **tls,
        )

    def _offline_status(self) -> bytes:
        return status_payload(
            online=False, mode=None, faults=[], stamp=self._wall(), identity=self.instance.fields()
        )

    async def _session(self, client: aiomqtt.Client) -> None:
        qos: int = self.settings.qos
        self._seen_status = None
        await client.subscribe(
            [(self.topics.targets, qos), (self.topics.joints, qos), (self.topics.status, 1)]
        )
        # The broker sends the retained status right after the SUBACK: one more round trip
        # and it has arrived (see _on_status), so the check below sees it.
        await client.unsubscribe(f"{self.topics.status}/sync")
        self._check_name()
        # Online only once both are subscribed: a client that acts on the status (hilbot
        # teleop sends "enable" when it sees the robot online) must not lose its first
        # command; a retained e-stop arrives on subscribing, before the status goes out.
        self._mark("targets", True)
        try:
            await self._links_up.wait()
            if self._background:  # a retained e-stop is running: report its effect
                await asyncio.wait(self._background, timeout=PUBLISH_TIMEOUT_S)
            status = await self._publish_status(client)
            self._online = True
            self.connected.set()
            self._logger.info("teleop on %s under %s/", self.url, self.topics.prefix)
            async with aio.TaskGroup() as group:
                group.create_task(self._receive(client), name="teleop-receive")
                group.create_task(self._telemetry(client, status), name="teleop-telemetry")
                group.create_task(self._publish_errors(client), name="teleop-errors")
        except asyncio.CancelledError:
            await self._say_goodbye(client)
            raise

    def _check_name(self) -> None:
        """Refuse to go online where another driver is (unless taking over, or outranking it).

        Raises:
            NameTaken: at this driver's first connection, another instance is online.
            TakenOver: on a later one, another instance that outranks this one is.
        """
        first, self._first_status = self._first_status, False
        seen = self._seen_status
        if seen is None or not seen.online or seen.instance == self.instance.id:
            return
        if first and not self.instance.takeover:
            raise NameTaken(self.topics.prefix, str(self.url), seen.instance)
        if not self.instance.outranks(seen):
            raise self._yield_to(seen)
        self._logger.warning(
            "taking over %s/ from driver %s", self.topics.prefix, seen.instance or "(unnamed)"
        )

    def _on_status(self, payload: bytes) -> None:
        """A ``status`` of this robot's name arrived (ours, a will, or another driver's)."""
        seen = read_status(payload)
        if not self._online:
            self._seen_status = seen  # connecting: _check_name decides
            return
        if seen is not None and seen.online and seen.instance == self.instance.id:
            return  # our own
        if seen is not None and seen.online and not self.instance.outranks(seen):
            self._yield_to(seen)
            return
        # A will (ours from an earlier connection, or another driver's), a cleared status,
        # or a driver this one outranks: publish ours again (the telemetry task does).
        self._logger.warning(
            "the status of %s/ was overwritten (%s); publishing it again",
            self.topics.prefix,
            "offline" if seen is None or not seen.online else f"by driver {seen.instance}",
        )
        self._status_stale = True

    def _yield_to(self, seen: Seen) -> TakenOver:
        """Another driver took this name over: stop obeying, and end the bridge."""
        if self._taken_over is None:
            self._taken_over = TakenOver(self.topics.prefix, seen.instance)
            self.connected.clear()
            self._taken.set()
        return self._taken_over

    async def _command_session(self, client: aiomqtt.Client) -> None:
        """The ``cmd`` connection: it subscribes to nothing else, so no flood shares it.

        It also follows the fleet-wide stop topic (``teleop.fleet_topic``).
        """
        topics = [(self.topics.cmd, 1)]
        if self._fleet is not None:
            topics.append((self._fleet[0], 1))
        await client.subscribe(topics)
        # The broker sends a retained command right after the SUBACK: one more round
        # trip lets it arrive before going online, so the first status reports it.
        await client.unsubscribe(f"{self.topics.cmd}/sync")
        self._command_client = client
        self._mark("commands", True)
        try:
            async for _ in client.messages:
                pass
        finally:
            self._command_client = None

    def _publisher(self, targets_client: aiomqtt.Client) -> aiomqtt.Client:
        """The connection to publish on: the command one while it is up.

        The targets connection may hold a flood in the broker's queue for it, and the
        PUBACK of a QoS 1 publish (``status``) waits behind it: under 10,000 messages/s
        on a busy machine it took over the 2 s publish timeout, which dropped the link.
        """
        return self._command_client if self._command_client is not None else targets_client

    async def _say_goodbye(self, client: aiomqtt.Client) -> None:
        """Publish ``status`` offline on a clean shutdown (the will covers the rest).

        Not once taken over: the status is the other driver's now.
        """
        self.connected.clear()
        self._online = False  # our own offline status, coming back, is no will to undo
        if self._taken_over is not None:
            return
        payload = self._offline_status()
        for publisher in dict.fromkeys((self._publisher(client), client)):
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                await publisher.publish(
                    self.topics.status, payload, qos=1, retain=True, timeout=PUBLISH_TIMEOUT_S
                )
                return

    # ---- inputs ---------------------------------------------------------------------

    async def _receive(self, client: aiomqtt.Client) -> None:
        # Messages never wait in the client's queue: the DispatchingQueue hands each to
        # handle() as it arrives. Iterating only notices a lost connection.
        async for _ in client.messages:
            pass

    def handle(self, topic: str, payload: bytes, retained: bool = False) -> Message | None:
        """Validate one incoming message and hand it to the runtime, synchronously.

        :meth:`accept`, then :meth:`deliver`; called for each message the
        moment it arrives (see :class:`DispatchingQueue`).

        Returns:
            The accepted message, or None if it was rejected.
        """
        if topic == self.topics.status:
            self._on_status(payload)
            return None
        message = self.accept(topic, payload, retained)
        if message is None or not self.deliver(topic, message):
            return None
        return message

    def accept(self, topic: str, payload: bytes, retained: bool = False) -> Message | None:
        """Parse and validate one incoming message; report and count it if it is bad.

        Called for every message as it arrives, so each bad payload is rejected
        on the ``error`` topic with its reason and seq however fast the next one
        follows, and never reaches the runtime. Checks the payload, the retain
        flag and freshness (``seq``, ``stamp``/``ttl``).

        Returns:
            The valid message, or None if it was rejected.
        """
        self.counters.received += 1
        fleet = self._fleet is not None and topic == self._fleet[0]
        if (topic == self.topics.cmd or fleet) and not payload:
            self._retained_cleared()  # an empty (retained) message clears the retained one
            return None
        try:
            if self._fleet is not None and fleet:
                message = parse(self._fleet[1].prefix + "/cmd", payload, self._fleet[1])
            else:
                message = parse(topic, payload, self._vocabulary)
            estop = isinstance(message, CommandMessage) and message.command is CommandName.ESTOP
            if fleet and not estop:
                raise MessageRejected(
                    Rejection(
                        RejectReason.REFUSED,
                        "the fleet-wide stop topic takes only 'estop'; send other commands "
                        f"to {self.topics.cmd}",
                        topic,
                        message.header.seq,
                    )
                )
            if estop and retained:
                self._found_retained_estop(topic)
            if not estop:
                # An e-stop is honoured whatever its seq, age or retain flag: it never moves.
                if retained:
                    raise MessageRejected(
                        Rejection(
                            RejectReason.RETAINED,
                            "retained messages are never acted on; publish without retain",
                            topic,
                            message.header.seq,
                        )
                    )
                self._freshness.check(topic, message.header)
        except MessageRejected as exc:
            self.reject(exc.rejection)
            return None
        except Exception as exc:  # a parser bug must not kill the MQTT read callback
            self._logger.exception("teleop: parsing a message on %s failed", topic)
            self.reject(Rejection(RejectReason.INVALID, f"cannot be parsed: {exc!r}", topic))
            return None
        return message

    def _found_retained_estop(self, topic: str) -> None:
        ca_file = self.settings.tls.ca_file
        self.retained_estop = RetainedEstop(
            topic,
            self.url,
            self.url.username or self.settings.username,
            str(ca_file) if ca_file is not None else None,
        )
        self._logger.warning("%s", self.retained_estop.explain())

    def _retained_cleared(self) -> None:
        if self.retained_estop is not None:
            self._logger.warning(
                "the retained e-stop on %s was cleared; reset the robot to re-arm it",
                self.retained_estop.topic,
            )
            self.retained_estop = None

    def deliver(self, topic: str, message: Message) -> bool:
        """Hand a valid message to the runtime; False if the runtime refused it (reported).

        Targets land in the runtime's latest-value slots, commands are queued
        for the command task (an e-stop runs at once).
        """
        self.current = (topic, message.header.seq)
        try:
            self._check_lease(topic, message)
            self._dispatch(topic, message)
        except MessageRejected as exc:
            self.reject(exc.rejection)
            return False
        self.counters.accepted += 1
        return True

    def _check_lease(self, topic: str, message: Message) -> None:
        """Refuse a message of anyone but the lease holder (an e-stop passes: anyone's).

        A sender takes a free lease with its first accepted target or command;
        ``disable`` and ``release`` end it, as does the holder's silence.
        """
        command = message.command if isinstance(message, CommandMessage) else None
        if command is CommandName.ESTOP:
            return
        if self._taken_over is not None:
            raise MessageRejected(
                Rejection(RejectReason.REFUSED, str(self._taken_over), topic, message.header.seq)
            )
        sender = message.header.sender
        if not self.lease.admit(sender):
            raise MessageRejected(
                Rejection(
                    RejectReason.NOT_LEASE_HOLDER,
                    self.lease.refusal(sender),
                    topic,
                    message.header.seq,
                )
            )
        if command in (CommandName.DISABLE, CommandName.RELEASE):
            self.lease.end(sender)
        if self.lease.holder != self._lease_holder:
            self._log_lease()

    def _log_lease(self) -> None:
        holder = self.lease.holder
        if holder is None:
            self._logger.info("lease: sender %r no longer holds the robot", self._lease_holder)
        else:
            self._logger.info("lease: sender %r holds the robot", holder)
        self._lease_holder = holder

    def _dispatch(self, topic: str, message: Message) -> None:
        try:
            match message:
                case PoseTarget():
                    self.runtime.set_target(
                        message.chain, message.runtime_target(), stamp=message.sampled
                    )
                case JointTarget():
                    self.runtime.set_joint_targets(message.positions, stamp=message.sampled)
                case CommandMessage(command=CommandName.ESTOP):
                    self._estop(message)
                case CommandMessage(command=CommandName.RELEASE):
                    pass  # the lease (see _check_lease); nothing for the runtime
                case CommandMessage() if not self.settings.command_allowed(message.command):
                    raise MessageRejected(self._not_allowed(topic, message))
                case CommandMessage():
                    self._commands.put_nowait(message)
        except asyncio.QueueFull:
            raise MessageRejected(
                Rejection(
                    RejectReason.REFUSED,
                    f"{COMMAND_QUEUE} commands are already waiting",
                    topic,
                    message.header.seq,
                )
            ) from None
        except (DriverError, ValueError, KeyError) as exc:
            raise MessageRejected(
                Rejection(refusal_reason(exc), str(exc), topic, message.header.seq)
            ) from None

    def _not_allowed(self, topic: str, message: CommandMessage) -> Rejection:
        allowed = sorted(c.value for c in self.settings.allowed_commands or ())
        return Rejection(
            RejectReason.REFUSED,
            f"command {message.command.value!r} is not accepted over MQTT "
            f"(teleop.allowed_commands: {', '.join(allowed)}); send it from the robot's terminal",
            topic,
            message.header.seq,
        )

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _estop(self, message: CommandMessage) -> None:
        """Run an e-stop at once, or fold it into the one in flight.

        A flood of e-stops costs one task and at most two runtime commands at a time,
        never one each. One that arrives before the e-stop in flight has gone out to
        the runtime is covered by it; one that arrives later is followed by one more
        e-stop once that one is done (so an e-stop always comes after a ``reset`` that
        came before it). An e-stop already in effect costs the runtime no bus traffic.
        """
        if not self._estop_running:
            self._estop_running = True
            self._estop_sent = False
            self._spawn(self._run_estops(message), "teleop-estop")
        elif self._estop_sent:
            self._estop_again = message

    async def _run_estops(self, message: CommandMessage) -> None:
        following: CommandMessage | None = message
        try:
            while following is not None:
                self._estop_again = None
                self._estop_sent = True  # _run_command hands it to the runtime without a pause
                await self._run_command(following)
                following = self._estop_again
        finally:
            self._estop_running = False
            self._estop_again = None

    async def _run_commands(self) -> None:
        while True:
            message = await self._commands.get()
            await self._run_command(message)

    async def _run_command(self, message: CommandMessage) -> None:
        """Run one command; a failure, whatever it is, is one line on the ``error`` topic."""
        self.counters.commands += 1
        self._logger.info("teleop command %s (seq %s)", message.command, message.header.seq)
        try:
            await self.runtime.command(self._to_command(message.command))
        except Exception as exc:
            # A refusal, a bus error, a stopped runtime or a closed worker channel: the
            # sender hears of it, and the next command runs (the command task never dies).
            detail = report_failure(message.command.value, exc, self._logger)
            self.reject(
                Rejection(RejectReason.REFUSED, detail, self.topics.cmd, message.header.seq)
            )

    def reject(self, rejection: Rejection) -> None:
        """Count ``rejection`` and queue it for the ``error`` topic (rate-limited)."""
        self.counters.rejected[rejection.reason.value] += 1
        self._logger.debug("rejected %s: %s", rejection.topic, rejection.detail)
        if len(self._errors) == self._errors.maxlen:
            self.counters.errors_suppressed += 1
        self._errors.append(rejection)
        self._errors_ready.set()

    # ---- outputs --------------------------------------------------------------------

    async def _publish_errors(self, client: aiomqtt.Client) -> None:
        budget_start, sent = time.monotonic(), 0
        while True:
            await self._errors_ready.wait()
            self._errors_ready.clear()
            while self._errors:
                now = time.monotonic()
                if now - budget_start >= 1.0:
                    budget_start, sent = now, 0
                if sent >= ERROR_RATE_LIMIT:
                    self.counters.errors_suppressed += len(self._errors)
                    self._errors.clear()
                    break
                rejection = self._errors.popleft()
                payload = rejection.to_json()
                payload["stamp"] = round(self._wall(), 6)
                payload["rejected_total"] = sum(self.counters.rejected.values())
                await self._publisher(client).publish(self.topics.error, encode(payload), qos=0)
                sent += 1

    async def _telemetry(self, client: aiomqtt.Client, last_status: tuple[Any, ...]) -> None:
        period = 1.0 / self.settings.state_rate_hz
        deadline = time.monotonic()
        while True:
            deadline += period
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            if deadline < time.monotonic() - period:
                deadline = time.monotonic()  # fell behind: skip, never burst
            body = state_body(self.runtime.state())
            holder = self.lease.holder
            if holder != self._lease_holder:
                self._log_lease()  # the holder fell silent
            payload = encode(
                {
                    "stamp": round(self._wall(), 6),
                    **body,
                    "teleop": self.counters.as_dict(),
                    "instance": self.instance.id,
                    "lease": holder,
                }
            )
            await self._publisher(client).publish(
                self.topics.state, payload, qos=self.settings.qos, timeout=PUBLISH_TIMEOUT_S
            )
            status = (body["mode"], body["faults"], self.retained_estop)
            if status != last_status or self._status_stale:
                self._status_stale = False
                await self._publish_status(client, body)
                last_status = status

    async def _publish_status(
        self, client: aiomqtt.Client, body: Mapping[str, Any] | None = None
    ) -> tuple[Any, ...]:
        """Publish the retained ``status``; returns the (mode, faults, retained e-stop) in it."""
        body = state_body(self.runtime.state()) if body is None else body
        retained = self.retained_estop
        payload = status_payload(
            online=True,
            mode=body["mode"],
            faults=body["faults"],
            stamp=self._wall(),
            retained_estop=retained.as_json() if retained is not None else None,
            identity=self.instance.fields(),
        )
        await self._publisher(client).publish(
            self.topics.status, payload, qos=1, retain=True, timeout=PUBLISH_TIMEOUT_S
        )
        return (body["mode"], body["faults"], retained)
