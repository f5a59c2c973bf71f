"""Errors of the teleop bridge.

::

    DriverError
    └── TeleopError
        ├── BrokerUrlError (ValueError)     a ``--mqtt`` URL that cannot be used
        └── EmbeddedBrokerError (OSError)   the embedded broker could not listen
"""

from __future__ import annotations

from hilbot.driver.errors import DriverError


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
