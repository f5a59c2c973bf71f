"""Broker URLs: ``mqtt://[user[:password]@]host[:port]`` and ``mqtts://...``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from hilbot.driver.teleop.errors import BrokerUrlError

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}


@dataclass(frozen=True, slots=True)
class BrokerUrl:
    """Where the broker is.

    Attributes:
        host: host name or address.
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
        """The URL without credentials, for logs."""
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"


def parse_broker_url(url: str) -> BrokerUrl:
    """Parse a broker URL; a bare ``host[:port]`` means ``mqtt://``.

    Raises:
        BrokerUrlError: naming what is wrong.
    """
    text = url.strip()
    if "://" not in text:
        text = "mqtt://" + text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise BrokerUrlError(url, f"unknown scheme {parts.scheme!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise BrokerUrlError(url, "a broker URL has no path, query or fragment")
    try:
        port = parts.port
    except ValueError:
        raise BrokerUrlError(url, "the port must be a number in 1..65535") from None
    if not parts.hostname:
        raise BrokerUrlError(url, "no host")
    return BrokerUrl(
        host=parts.hostname,
        port=port if port else DEFAULT_PORTS[scheme],
        tls=scheme == "mqtts",
        username=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )
