"""An embedded MQTT 3.1.1 broker (amqtt) for running without an external one."""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from hilbot._compat import Self
from hilbot.driver.teleop.client import url_host
from hilbot.driver.teleop.errors import EmbeddedBrokerError

LOCALHOST = "127.0.0.1"
#: amqtt's own check of a file of ``user:hash`` lines (argon2, or sha512_crypt), its hash
#: computed off the event loop.
FILE_AUTH = "hilbot.driver.teleop.amqtt_broker.FileAuthPlugin"
ANONYMOUS_AUTH = "amqtt.plugins.authentication.AnonymousAuthPlugin"
CREDENTIALS_AUTH = "hilbot.driver.teleop.amqtt_broker.CredentialsAuthPlugin"


class EmbeddedBroker:
    """amqtt's broker in this process, bound to one address (127.0.0.1 by default).

    amqtt binds 0.0.0.0 unless told otherwise, which would expose the robot to
    the network, so the bind address is always explicit. Anonymous clients are
    allowed unless ``users`` or ``password_file`` is given; then a client must
    log in as one of those users. Each client's packets pass an
    :class:`~hilbot.driver.teleop.amqtt_broker.IngressReader`: commands first, floods
    of QoS 0 publishes conflated, so no flood delays an e-stop.

    Args:
        host: address to bind (an IPv6 one with or without brackets: ``::1``, ``[::1]``).
        port: TCP port; 0 picks a free one (read it back from :attr:`port`).
        logger: where to log start and stop.
        users: accepted ``{user name: password}`` (held in memory only).
        password_file: a file of ``user:hash`` lines, hashes in argon2 (``python -m
            hilbot.driver.teleop.passwd FILE USER`` writes them) or sha512_crypt
            (``$6$...``, deprecated by amqtt); checked by amqtt's FileAuthPlugin.

    Example::

        async with EmbeddedBroker(port=0) as broker:
            print(broker.url)  # mqtt://127.0.0.1:<port>
    """

    def __init__(
        self,
        host: str = LOCALHOST,
        port: int = 1883,
        *,
        logger: logging.Logger | None = None,
        users: Mapping[str, str] | None = None,
        password_file: Path | None = None,
    ) -> None:
        self.host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        self.port = port
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self._users = dict(users) if users else {}
        self._password_file = password_file
        self._broker: Any = None

    @property
    def requires_login(self) -> bool:
        """Whether anonymous clients are refused."""
        return bool(self._users) or self._password_file is not None

    @property
    def url(self) -> str:
        """``mqtt://host:port`` of the running broker (``mqtt://[::1]:port`` on IPv6)."""
        return f"mqtt://{url_host(self.host)}:{self.port}"

    def _plugins(self) -> dict[str, Any]:
        plugins: dict[str, Any] = {}
        if self._users:
            plugins[CREDENTIALS_AUTH] = {"users": self._users}
        if self._password_file is not None:
            if not self._password_file.is_file():
                raise EmbeddedBrokerError(
                    self.host, self.port, f"the password file {self._password_file} does not exist"
                )
            plugins[FILE_AUTH] = {"password_file": str(self._password_file)}
        if not plugins:
            plugins[ANONYMOUS_AUTH] = {"allow_anonymous": True}
        return plugins

    async def __aenter__(self) -> Self:
        from amqtt.errors import BrokerError  # imported here: amqtt is slow to import

        from hilbot.driver.teleop.amqtt_broker import FilteringBroker

        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            "plugins": self._plugins(),
        }
        with _quiet_amqtt():
            broker = FilteringBroker(config)
            try:
                await broker.start()
            except BrokerError as exc:
                raise EmbeddedBrokerError(self.host, self.port, _explain(exc, self.port)) from exc
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
            with _quiet_amqtt():
                await broker.shutdown()
            self._logger.info("embedded MQTT broker stopped")


@contextlib.contextmanager
def _quiet_amqtt() -> Iterator[None]:
    """Keep amqtt's own tracebacks off the terminal: a failed start is reported as one line.

    amqtt logs a failed start with ``logger.exception`` and a shutdown with a
    warning per undelivered message; the :class:`EmbeddedBrokerError` says it all.
    """
    amqtt_logger = logging.getLogger("amqtt")
    level = amqtt_logger.level
    amqtt_logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        amqtt_logger.setLevel(level)


def _explain(exc: BaseException, port: int) -> str:
    cause = exc.__cause__
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
        return (
            f"port {port} is in use (another hilbot run or MQTT broker?): choose another "
            "with --broker-port PORT (0 = any free port) or teleop.embedded_port, or use "
            f"that broker with --mqtt mqtt://127.0.0.1:{port}"
        )
    if isinstance(cause, OSError):
        return f"cannot listen: {cause.strerror or cause}"
    return str(exc)
