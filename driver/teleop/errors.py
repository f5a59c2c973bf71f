"""Errors of the teleop bridge.

::

    DriverError
    └── TeleopError
        ├── BrokerUrlError (ValueError)     a ``--mqtt`` URL that cannot be used
        ├── EmbeddedBrokerError (OSError)   the embedded broker could not listen
        ├── BrokerUnreachable (ConnectionError)  no broker, or a refused login, at start-up
        ├── InsecureBroker                  a broker beyond loopback without a login
        ├── NameTaken                       another driver is online under this robot's topics
        ├── TakenOver                       another driver took this robot's topics over
        └── NotConnected (ConnectionError)  a command while a client is reconnecting
"""

from __future__ import annotations

from hilbot._compat import BaseExceptionGroup
from hilbot.driver.runtime.errors import DriverError


def first_teleop_error(error: BaseException) -> TeleopError | None:
    """The first :class:`TeleopError` in ``error``, looking inside (nested) exception groups."""
    if isinstance(error, TeleopError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = first_teleop_error(inner)
            if found is not None:
                return found
    return None


class TeleopError(DriverError):
    """Root of the teleop errors."""


class BrokerUrlError(TeleopError, ValueError):
    """A broker URL is malformed.

    Attributes:
        url: the URL as given.
        problem: what is wrong with it.
    """

    def __init__(self, url: str, problem: str) -> None:
        self.url = url
        self.problem = problem
        super().__init__(
            f"broker URL {url!r}: {problem}; expected mqtt://host[:port] or mqtts://host[:port]"
        )


class EmbeddedBrokerError(TeleopError, OSError):
    """The embedded broker could not start listening.

    Attributes:
        host: the address it tried to bind.
        port: the port it tried to bind.
        problem: why it failed, and what to do.
    """

    def __init__(self, host: str, port: int, problem: str) -> None:
        self.host = host
        self.port = port
        self.problem = problem
        super().__init__(f"embedded MQTT broker on {host}:{port}: {problem}")


class BrokerUnreachable(TeleopError, ConnectionError):
    """The MQTT broker could not be reached, or refused the login, at the first attempt.

    Attributes:
        url: the broker (without credentials).
        problem: what the connection attempt reported.
    """

    def __init__(self, url: str, problem: str) -> None:
        self.url = url
        self.problem = problem
        super().__init__(
            f"cannot connect to the MQTT broker {url}: {problem} (is it running, and are "
            "the host, port and login right? the login comes from HILBOT_MQTT_USERNAME / "
            "HILBOT_MQTT_PASSWORD or the config's teleop section)"
        )


class InsecureBroker(TeleopError):
    """The broker is reachable beyond this machine and nothing protects arming.

    Attributes:
        where: the broker or the address the embedded one would listen on.
    """

    def __init__(self, where: str, fix: str) -> None:
        self.where = where
        super().__init__(
            f"{where} is reachable beyond this machine and has no login, so anyone who "
            f"reaches it could arm and move the robot: {fix}, or pass --insecure to run anyway"
        )


class NameTaken(TeleopError):
    """Another driver is online under this robot's topic prefix (found at start).

    Attributes:
        prefix: the topic prefix both answer to.
        other: the other driver's instance id (None if its status names none).
    """

    def __init__(self, prefix: str, url: str, other: str | None) -> None:
        self.prefix = prefix
        self.other = other
        who = f"driver {other}" if other else "driver"
        super().__init__(
            f"another {who} is online as {prefix}/ on {url}: give this robot another name "
            "(the config's name) or topic prefix (teleop.prefix), stop the other one, or "
            "start this one with --takeover"
        )


class TakenOver(TeleopError):
    """Another driver took over this robot's topic prefix while this one ran.

    Attributes:
        prefix: the topic prefix.
        other: the instance id of the driver that took it.
    """

    def __init__(self, prefix: str, other: str | None) -> None:
        self.prefix = prefix
        self.other = other
        super().__init__(
            f"driver {other or '(unnamed)'} took over {prefix}/: this one stopped obeying "
            "MQTT and stops"
        )


class NotConnected(TeleopError, ConnectionError):
    """A command could not be sent: the broker is lost and the client is reconnecting.

    Attributes:
        url: the broker.
    """

    def __init__(self, url: str, why: str = "") -> None:
        self.url = url
        detail = f" ({why})" if why else ""
        super().__init__(f"not connected to the MQTT broker {url}{detail}; reconnecting")
