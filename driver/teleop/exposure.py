"""Who can reach the broker: ``hilbot run`` refuses an unprotected one beyond loopback."""

from __future__ import annotations

import ipaddress

from hilbot.driver.teleop.errors import InsecureBroker
from hilbot.driver.teleop.settings import ENV_PASSWORD, ENV_USERNAME, TeleopSettings
from hilbot.driver.teleop.url import parse_broker_url


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
