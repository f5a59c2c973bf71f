"""Broker URLs: ``mqtt://[user[:password]@]host[:port]`` and ``mqtts://...``.

An IPv6 address goes in brackets, as in any URL: ``mqtt://[::1]:1883``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from hilbot.driver.teleop.errors import BrokerUrlError

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
