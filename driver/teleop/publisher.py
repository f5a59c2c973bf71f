"""A teleop client: publishes targets and commands, follows ``state`` and ``status``.

Used by ``hilbot teleop``, by the ``hilbot run`` demo and by the tests; it is an
ordinary MQTT client and knows nothing of the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self

import aiomqtt
import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from hilbot.driver.teleop.bridge import NO_DELAY
from hilbot.driver.teleop.client import MqttClient
from hilbot.driver.teleop.settings import TeleopSettings
from hilbot.driver.teleop.topics import Topics
from hilbot.driver.teleop.url import BrokerUrl, parse_broker_url


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

    async def __aenter__(self) -> Self:
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
        self._client = client
        try:
            await client.subscribe(
                [(self.topics.state, 0), (self.topics.status, 1), (self.topics.error, 0)]
            )
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        self._reader = asyncio.get_running_loop().create_task(self._read(client))
        return self

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
        """The connected MQTT client; raises outside ``async with``."""
        if self._client is None:
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
        async with asyncio.timeout(timeout), self._updated:
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
        """Publish a command (QoS 1); returns its ``seq``."""
        return await self._publish(self.topics.cmd, {"command": name}, qos=1, stamp=False)

    async def target(
        self,
        chain: str,
        position: npt.ArrayLike,
        orientation: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
    ) -> int:
        """Publish a pose target for ``chain``; returns its ``seq``."""
        body: dict[str, Any] = {"position": np.asarray(position, dtype=float).tolist()}
        if orientation is not None:
            body["orientation"] = dict(orientation)
        return await self._publish(self.topics.target(chain), body, ttl=ttl)

    async def joint_target(
        self, positions: Mapping[str, float], *, ttl: float | None = None
    ) -> int:
        """Publish joint targets [rad or m]; returns its ``seq``."""
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
        await self.client.publish(
            topic,
            json.dumps(message, separators=(",", ":")),
            qos=self.settings.qos if qos is None else qos,
        )
        return seq


def _as_text(payload: object) -> str | bytes:
    if isinstance(payload, bytes | str):
        return payload
    return bytes(payload) if isinstance(payload, bytearray) else str(payload)
