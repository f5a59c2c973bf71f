"""Teleop settings: the ``teleop:`` section of a robot config, and ``hilbot run``'s options.

Also the check that refuses an unprotected broker beyond loopback.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from hilbot.driver.teleop.client import parse_broker_url
from hilbot.driver.teleop.errors import InsecureBroker, TeleopError
from hilbot.driver.teleop.messages import CommandName

#: Environment variables read by :meth:`TeleopSettings.with_environment`; they
#: override the config file so that secrets stay out of YAML.
ENV_USERNAME = "HILBOT_MQTT_USERNAME"
ENV_PASSWORD = "HILBOT_MQTT_PASSWORD"
ENV_CA_FILE = "HILBOT_MQTT_CA_FILE"
ENV_CERT_FILE = "HILBOT_MQTT_CERT_FILE"
ENV_KEY_FILE = "HILBOT_MQTT_KEY_FILE"
ENV_TLS_INSECURE = "HILBOT_MQTT_TLS_INSECURE"
ENV_CLIENT_ID = "HILBOT_MQTT_CLIENT_ID"

#: The default fleet-wide stop topic (``teleop.fleet_topic``).
FLEET_TOPIC = "hilbot/_all/cmd"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class TlsSettings(BaseModel):
    """TLS for ``mqtts://`` brokers.

    Attributes:
        ca_file: CA bundle that signs the broker's certificate (None: system store).
        cert_file: client certificate, for brokers that authenticate clients by certificate.
        key_file: private key of ``cert_file``.
        insecure: skip the broker host-name check (test brokers only).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    insecure: bool = False

    @model_validator(mode="after")
    def _key_needs_cert(self) -> TlsSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: give both or neither")
        return self


class TeleopSettings(BaseModel):
    """How a robot is teleoperated over MQTT.

    Attributes:
        prefix: topic prefix; None means ``hilbot/<robot name>``.
        state_rate_hz: telemetry rate on the ``state`` topic [Hz], decimated
            from the control loop.
        max_payload_bytes: larger messages are rejected unparsed.
        default_ttl_s: lifetime [s] of a timestamped target that carries no
            ``ttl`` of its own.
        max_clock_skew_s: a ``stamp`` further than this in the future is rejected [s].
        qos: QoS of target subscriptions and telemetry (commands always use 1).
        keepalive_s: MQTT keep-alive [s]; the broker publishes the last will
            (``status`` offline) about 1.5 keep-alives after the link dies.
        username: broker user name.
        password: broker password.
        tls: TLS options, used with ``mqtts://`` URLs.
        reconnect_min_s: first reconnect delay [s]; doubles on each failure.
        reconnect_max_s: longest reconnect delay [s]; delays are jittered.
        client_id: MQTT client id; None means ``hilbot-<robot>-<random>``.
        embedded_port: port of the embedded broker started when no broker URL
            is given; 0 picks a free port.
        embedded_host: address the embedded broker binds (127.0.0.1: this machine
            only). Another address needs credentials (``hilbot run`` refuses to
            start without them unless ``--insecure``).
        password_file: a file of ``user:hash`` lines (argon2; ``python -m
            hilbot.driver.teleop.passwd FILE USER`` adds one) the embedded broker
            checks logins against. With ``username``/``password`` set and no
            file, the embedded broker accepts that one login. Either way it
            refuses anonymous clients.
        allowed_commands: the ``cmd`` commands accepted over MQTT (None: all);
            others are refused on the error topic. ``estop`` must be among them.
        worker_nice: CPU niceness added to the teleop worker process. 0 by
            default: the e-stop passes through the worker (the embedded broker and
            the command connection live there), and a niced worker beside two
            CPU-bound jobs on 2 cores delayed it by up to 2 s; the control loop
            kept its rate under a flood with the worker at 0 (it sleeps most of
            each cycle, so the scheduler favours it anyway).
        lease_timeout_s: the lease holder's silence [s] that ends its lease; None
            means the robot's ``safety.watchdog_timeout`` (0.5 s if that is off).
        fleet_topic: the fleet-wide stop: an ``estop`` published there stops every
            driver on the broker (anything else is refused); None listens to none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefix: str | None = Field(default=None, min_length=1)
    state_rate_hz: float = Field(default=20.0, gt=0.0, le=1000.0)
    max_payload_bytes: int = Field(default=4096, ge=64, le=1_048_576)
    default_ttl_s: float = Field(default=0.5, gt=0.0, le=3600.0)
    max_clock_skew_s: float = Field(default=0.5, ge=0.0, le=60.0)
    qos: Literal[0, 1, 2] = 0
    keepalive_s: int = Field(default=5, ge=1, le=3600)
    username: str | None = None
    password: SecretStr | None = None
    tls: TlsSettings = TlsSettings()
    reconnect_min_s: float = Field(default=0.1, gt=0.0, le=60.0)
    reconnect_max_s: float = Field(default=5.0, gt=0.0, le=600.0)
    client_id: str | None = Field(default=None, min_length=1, max_length=64)
    embedded_port: int = Field(default=1883, ge=0, le=65535)
    worker_nice: int = Field(default=0, ge=0, le=19)
    embedded_host: str = Field(default="127.0.0.1", min_length=1)
    password_file: Path | None = None
    allowed_commands: frozenset[CommandName] | None = None
    lease_timeout_s: float | None = Field(default=None, gt=0.0, le=3600.0)
    fleet_topic: str | None = Field(default=FLEET_TOPIC, min_length=1)

    @field_validator("allowed_commands", mode="after")
    @classmethod
    def _estop_stays(cls, value: frozenset[CommandName] | None) -> frozenset[CommandName] | None:
        if value is not None and CommandName.ESTOP not in value:
            raise ValueError(
                "must include estop: an e-stop over MQTT is never refused "
                f"(got {sorted(c.value for c in value)})"
            )
        return value

    @property
    def embedded_login(self) -> bool:
        """Whether the embedded broker refuses anonymous clients."""
        return self.password_file is not None or (
            self.username is not None and self.password is not None
        )

    def command_allowed(self, command: CommandName) -> bool:
        """Whether ``command`` is accepted over MQTT."""
        return self.allowed_commands is None or command in self.allowed_commands

    @model_validator(mode="after")
    def _check(self) -> TeleopSettings:
        if self.reconnect_min_s > self.reconnect_max_s:
            raise ValueError(
                f"reconnect_min_s ({self.reconnect_min_s}) must not exceed "
                f"reconnect_max_s ({self.reconnect_max_s})"
            )
        for name, topic in (("prefix", self.prefix), ("fleet_topic", self.fleet_topic)):
            if topic is not None and (
                topic.startswith("/") or topic.endswith("/") or any(c in topic for c in "#+\0")
            ):
                raise ValueError(
                    f"{name} {topic!r} must not start or end with '/' "
                    "nor contain the wildcards '#' or '+'"
                )
        return self

    def topic_prefix(self, robot_name: str) -> str:
        """Return the topic prefix, ``hilbot/<robot_name>`` unless configured."""
        return self.prefix if self.prefix is not None else f"hilbot/{robot_name}"

    def with_environment(self, environ: Mapping[str, str] | None = None) -> TeleopSettings:
        """Return a copy with the ``HILBOT_MQTT_*`` environment variables applied.

        Variables that are set override the config: ``HILBOT_MQTT_USERNAME``,
        ``HILBOT_MQTT_PASSWORD``, ``HILBOT_MQTT_CA_FILE``, ``HILBOT_MQTT_CERT_FILE``,
        ``HILBOT_MQTT_KEY_FILE``, ``HILBOT_MQTT_TLS_INSECURE`` (1/0, true/false)
        and ``HILBOT_MQTT_CLIENT_ID``.

        Raises:
            ValueError: a variable holds a value that is not valid here.
        """
        env = os.environ if environ is None else environ
        update: dict[str, object] = {}
        if ENV_USERNAME in env:
            update["username"] = env[ENV_USERNAME]
        if ENV_PASSWORD in env:
            update["password"] = env[ENV_PASSWORD]
        if ENV_CLIENT_ID in env:
            update["client_id"] = env[ENV_CLIENT_ID]
        tls = self.tls.model_dump()
        for var, key in (
            (ENV_CA_FILE, "ca_file"),
            (ENV_CERT_FILE, "cert_file"),
            (ENV_KEY_FILE, "key_file"),
        ):
            if var in env:
                tls[key] = env[var] or None
        if ENV_TLS_INSECURE in env:
            tls["insecure"] = _parse_bool(ENV_TLS_INSECURE, env[ENV_TLS_INSECURE])
        update["tls"] = tls
        data = self.model_dump()
        if self.password is not None:
            data["password"] = self.password.get_secret_value()
        data.update(update)
        return TeleopSettings.model_validate(data)


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{name}={value!r}: expected one of 1/0, true/false, yes/no, on/off")


# Who can reach the broker: ``hilbot run`` refuses an unprotected one beyond loopback.


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, ``localhost``).

    A host name other than ``localhost`` counts as remote: it is not resolved here.
    """
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: TeleopSettings, url: str | None, *, insecure: bool) -> list[str]:
    """Check that a broker reachable beyond loopback needs a login; return warnings.

    Args:
        settings: teleop settings, with the environment applied.
        url: the ``--mqtt`` URL, or None for the embedded broker.
        insecure: run anyway (``--insecure``): the refusal becomes a warning.

    Returns:
        Warnings for the terminal (a password in the URL, an accepted ``--insecure``).

    Raises:
        BrokerUrlError: ``url`` is malformed.
        InsecureBroker: beyond loopback without a login, and not ``insecure``.
    """
    warnings: list[str] = []
    login = f"set {ENV_USERNAME} and {ENV_PASSWORD}"
    if url is None:
        host = settings.embedded_host
        protected = settings.embedded_login
        where = f"the embedded MQTT broker on {host}:{settings.embedded_port}"
        fix = f"{login} (or teleop.password_file)"
    else:
        broker = parse_broker_url(url)
        host = broker.host
        if broker.password is not None:
            warnings.append(
                f"the password in the --mqtt URL is visible to other users of this machine "
                f"(ps, shell history): set {ENV_PASSWORD} instead"
            )
        has_password = broker.password is not None or settings.password is not None
        has_user = broker.username is not None or settings.username is not None
        protected = (has_user and has_password) or settings.tls.cert_file is not None
        where = f"the MQTT broker {broker}"
        fix = f"{login} (or give a client certificate with HILBOT_MQTT_CERT_FILE)"
    if is_loopback(host) or protected:
        return warnings
    if not insecure:
        raise InsecureBroker(where, fix)
    warnings.append(f"--insecure: {where} has no login; anyone who reaches it can arm the robot")
    return warnings


# ``hilbot run``'s MQTT options applied to a config: broker port and address, the login check.


def teleop_config(config: Any, args: argparse.Namespace, logger: logging.Logger) -> Any:
    """Return ``config`` with ``--broker-port`` / ``--broker-host`` applied, once checked.

    Checks that a broker reachable beyond loopback has a login (see
    :func:`~hilbot.driver.teleop.settings.check_exposure`) and logs its warnings.

    Raises:
        TeleopError: a bad option value or combination, a malformed ``--mqtt`` URL, or
            an unprotected broker beyond loopback without ``--insecure``.
    """
    port = getattr(args, "broker_port", None)
    host = getattr(args, "broker_host", None)
    url = getattr(args, "mqtt", None)
    if url is not None and (port is not None or host is not None):
        option = "--broker-port" if port is not None else "--broker-host"
        raise TeleopError(f"{option} is for the embedded broker; --mqtt {url} names another")
    update: dict[str, Any] = {}
    if port is not None:
        if not 0 <= port <= 65535:
            raise TeleopError(f"--broker-port {port}: a TCP port is 0..65535 (0 = any free one)")
        update["embedded_port"] = port
    if host is not None:
        update["embedded_host"] = host
    settings: TeleopSettings = config.teleop
    if update:
        settings = settings.model_copy(update=update)
    try:
        environment = settings.with_environment()
    except (ValidationError, ValueError) as exc:
        raise TeleopError(f"the HILBOT_MQTT_* environment: {exc}") from None
    for warning in check_exposure(environment, url, insecure=getattr(args, "insecure", False)):
        logger.warning("%s", warning)
    return config.model_copy(update={"teleop": settings}) if update else config
