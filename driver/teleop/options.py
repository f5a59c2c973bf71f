"""``hilbot run``'s MQTT options applied to a config: broker port and address, the login check."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from pydantic import ValidationError

from hilbot.driver.teleop.errors import TeleopError
from hilbot.driver.teleop.exposure import check_exposure
from hilbot.driver.teleop.settings import TeleopSettings


def teleop_config(config: Any, args: argparse.Namespace, logger: logging.Logger) -> Any:
    """Return ``config`` with ``--broker-port`` / ``--broker-host`` applied, once checked.

    Checks that a broker reachable beyond loopback has a login (see
    :func:`~hilbot.driver.teleop.exposure.check_exposure`) and logs its warnings.

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
