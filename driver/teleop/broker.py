"""An embedded MQTT 3.1.1 broker (amqtt) for running without an external one."""

from __future__ import annotations

import errno
import logging
from types import TracebackType
from typing import Any, Self

from hilbot.driver.teleop.errors import EmbeddedBrokerError

LOCALHOST = "127.0.0.1"


class EmbeddedBroker:
    """amqtt's broker in this process, bound to one address (127.0.0.1 by default).

    amqtt binds 0.0.0.0 unless told otherwise, which would expose an
    unauthenticated robot to the network, so the bind address is always
    explicit. Anonymous clients are allowed: only local processes can connect.

    Args:
        host: address to bind.
        port: TCP port; 0 picks a free one (read it back from :attr:`port`).
        logger: where to log start and stop.

    Example::

        async with EmbeddedBroker(port=0) as broker:
            print(broker.url)  # mqtt://127.0.0.1:<port>
    """

    def __init__(
        self, host: str = LOCALHOST, port: int = 1883, *, logger: logging.Logger | None = None
    ) -> None:
        self.host = host
        self.port = port
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self._broker: Any = None

    @property
    def url(self) -> str:
        """``mqtt://host:port`` of the running broker."""
        return f"mqtt://{self.host}:{self.port}"

    async def __aenter__(self) -> Self:
        from amqtt.broker import Broker  # imported here: it is slow to import
        from amqtt.errors import BrokerError

        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}
            },
        }
        broker = Broker(config)
        try:
            await broker.start()
        except BrokerError as exc:
            raise EmbeddedBrokerError(self.host, self.port, _explain(exc)) from exc
        self._broker = broker
        sockets = broker._servers["default"].instance.sockets
        self.port = int(sockets[0].getsockname()[1])
        self._logger.info("embedded MQTT broker listening on %s", self.url)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        broker, self._broker = self._broker, None
        if broker is not None:
            await broker.shutdown()
            self._logger.info("embedded MQTT broker stopped")


def _explain(exc: BaseException) -> str:
    cause = exc.__cause__
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
        return (
            "the port is in use (another broker?): pass --mqtt mqtt://127.0.0.1:<port> "
            "to use that broker, or set teleop.embedded_port (0 = any free port)"
        )
    return str(exc)
