"""The connection to the broker: its URL, ``MqttClient`` and the reconnect backoff.

``MqttClient`` is aiomqtt's client, with timeouts that never swallow a cancellation.

aiomqtt bounds every broker round trip (connect, subscribe, publish with QoS > 0,
disconnect) with ``asyncio.wait_for``. On Python 3.11, ``wait_for`` returns the
result instead of raising ``CancelledError`` when the awaited operation finishes
in the same loop iteration as a ``cancel()`` (CPython gh-86296, fixed in 3.12 by
reimplementing ``wait_for`` on ``asyncio.timeout``). A teleop bridge publishing
state at 50 Hz with QoS 1 hits that window within minutes of start/stop cycles,
and a cancel swallowed inside an ``asyncio.TaskGroup`` child hangs shutdown for
good: the group cancels each child once.

``asyncio.timeout`` counts cancellations (``Task.cancelling``/``uncancel``), so it
converts only its own cancel into ``TimeoutError`` and lets every other one
through. ``MqttClient`` routes aiomqtt's waits through it; everything else is
aiomqtt unchanged. Every MQTT client hilbot opens is an ``MqttClient``.

Python 3.10 has neither ``asyncio.timeout`` nor ``uncancel`` (and its ``wait_for`` has
the same flaw): :mod:`hilbot._compat_asyncio` gives it the ``taskgroup`` backport's
``timeout``, which runs the block in a task that counts cancellations the same way.
"""

from __future__ import annotations

import inspect
import ipaddress
import math
import random
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import aiomqtt

from hilbot import _compat_asyncio as aio
from hilbot.driver.teleop.errors import BrokerUrlError

# Broker URLs: ``mqtt://[user[:password]@]host[:port]`` and ``mqtts://...``.
#
# An IPv6 address goes in brackets, as in any URL: ``mqtt://[::1]:1883``.

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
_PORT_RANGE = "the port must be a number in 1..65535"


@dataclass(frozen=True, slots=True)
class BrokerUrl:
    """Where the broker is.

    Attributes:
        host: host name or address (an IPv6 address without brackets).
        port: TCP port.
        tls: whether to use TLS (``mqtts``).
        username: user name from the URL, or None.
        password: password from the URL, or None.
    """

    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = None

    def __str__(self) -> str:
        """The URL without credentials, for logs; :func:`parse_broker_url` reads it back."""
        return f"{'mqtts' if self.tls else 'mqtt'}://{url_host(self.host)}:{self.port}"


def url_host(host: str) -> str:
    """``host`` as it is written in a URL: an IPv6 address in brackets (``[::1]``).

    A zone (``fe80::1%eth0``) is written ``%25eth0``, as RFC 6874 says.
    """
    if ":" not in host or host.startswith("["):
        return host
    return f"[{quote(host, safe=':')}]"


def parse_broker_url(url: str) -> BrokerUrl:
    """Parse a broker URL; a bare ``host[:port]`` means ``mqtt://``.

    Raises:
        BrokerUrlError: naming what is wrong.
    """
    text = url.strip()
    if "://" not in text:
        text = "mqtt://" + text
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # "Invalid IPv6 URL": a bracket that is not closed, or stray
        raise BrokerUrlError(url, _bracket_problem(str(exc))) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise BrokerUrlError(url, f"unknown scheme {parts.scheme!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise BrokerUrlError(url, "a broker URL has no path, query or fragment")
    _check_address(url, parts.netloc.rpartition("@")[2])
    try:
        port = parts.port
    except ValueError:
        raise BrokerUrlError(url, _PORT_RANGE) from None
    if port == 0:  # a client cannot connect to "any free port"; only an absent one defaults
        raise BrokerUrlError(url, _PORT_RANGE)
    if not parts.hostname:
        raise BrokerUrlError(url, "no host")
    return BrokerUrl(
        host=unquote(parts.hostname),
        port=port if port is not None else DEFAULT_PORTS[scheme],
        tls=scheme == "mqtts",
        username=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )


_IPV6_EXAMPLE = "as in mqtt://[::1]:1883"


def _bracket_problem(reason: str) -> str:
    if reason == "Invalid IPv6 URL":  # urlsplit's words for an unmatched bracket
        return f"unmatched bracket: an IPv6 address goes in [ and ], {_IPV6_EXAMPLE}"
    return f"{reason}; brackets hold an IPv6 address, {_IPV6_EXAMPLE}"


def _check_address(url: str, address: str) -> None:
    """Refuse an IPv6 address without brackets, and anything but one inside them."""
    if not address.startswith("["):
        if address.count(":") > 1:
            raise BrokerUrlError(url, f"an IPv6 address goes in brackets, {_IPV6_EXAMPLE}")
        return
    inside, _, after = address[1:].partition("]")
    try:
        ipaddress.IPv6Address(unquote(inside))
    except ValueError:
        raise BrokerUrlError(
            url, f"{inside!r} is no IPv6 address; brackets hold one, {_IPV6_EXAMPLE}"
        ) from None
    if after and not after.startswith(":"):
        raise BrokerUrlError(url, f"{after!r} after the address: only :port may follow it")


# Jittered exponential backoff for reconnecting to the broker.


class Backoff:
    """Reconnect delays: doubling from ``minimum`` up to ``maximum``, with jitter.

    Each delay is drawn uniformly from [d/2, d] where d is the current
    un-jittered delay ("equal jitter"), so many robots that lost the same
    broker do not reconnect in lockstep, and none waits less than half the
    nominal delay.

    Args:
        minimum: first delay [s].
        maximum: cap of the un-jittered delay [s].
        rng: random source (seed it in tests).
    """

    def __init__(self, minimum: float, maximum: float, rng: random.Random | None = None) -> None:
        if not 0.0 < minimum <= maximum:
            raise ValueError(f"need 0 < minimum <= maximum, got {minimum} and {maximum}")
        self._minimum = minimum
        self._maximum = maximum
        self._rng = rng if rng is not None else random.Random()
        self._current = minimum
        self.attempts = 0

    def next_delay(self) -> float:
        """Return the next delay [s] and double the nominal one."""
        nominal = self._current
        self._current = min(self._maximum, nominal * 2.0)
        self.attempts += 1
        return nominal / 2.0 + self._rng.uniform(0.0, nominal / 2.0)

    def reset(self) -> None:
        """Start again from ``minimum`` (after a successful connection)."""
        self._current = self._minimum
        self.attempts = 0


T = TypeVar("T")


class MqttClient(aiomqtt.Client):
    """``aiomqtt.Client`` whose operation timeouts use ``asyncio.timeout`` (or its backport).

    A SUBACK or UNSUBACK whose (un)subscribe was cancelled or timed out (a driver that
    refuses to start cancels its sessions mid-round-trip; a busy host answers late) is
    expected, not an error: aiomqtt logs a traceback for it, this client a debug line.
    """

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, *args: Any) -> None:
        if mid not in self._pending_subscribes:
            self._logger.debug("a SUBACK (message %d) for a subscribe no longer waited for", mid)
            return
        super()._on_subscribe(client, userdata, mid, *args)

    def _on_unsubscribe(self, client: Any, userdata: Any, mid: int, *args: Any) -> None:
        if mid not in self._pending_unsubscribes:
            self._logger.debug(
                "an UNSUBACK (message %d) for an unsubscribe no longer waited for", mid
            )
            return
        super()._on_unsubscribe(client, userdata, mid, *args)

    async def _wait_for(self, fut: Awaitable[T], timeout: float | None) -> T:
        if timeout is None:
            timeout = self.timeout
        if timeout == math.inf:
            return await fut
        try:
            async with aio.timeout(timeout):
                return await fut
        except TimeoutError:
            raise aiomqtt.MqttError("Operation timed out") from None
        finally:
            if inspect.iscoroutine(fut):
                # On 3.10 entering the timeout suspends: a cancel then leaves ``fut`` (a
                # coroutine such as ``confirmation.wait()``) unawaited. Closing it is a no-op
                # once it has run.
                fut.close()
