"""A retained e-stop on ``cmd``: what it is, and the one command that clears it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from hilbot.driver.teleop.client import BrokerUrl
from hilbot.driver.teleop.settings import ENV_PASSWORD


@dataclass(frozen=True, slots=True)
class RetainedEstop:
    """A retained ``estop`` the broker handed the bridge on subscribing to ``cmd``.

    The broker hands it to every new subscriber, so it e-stops the robot at every
    start until someone publishes an empty retained message on the topic.

    Attributes:
        topic: the ``cmd`` topic it is retained on.
        url: the broker holding it.
        username: the login to clear it with, if the broker needs one.
        ca_file: the CA bundle of a TLS broker (None: the system's).
    """

    topic: str
    url: BrokerUrl
    username: str | None = None
    ca_file: str | None = None

    @property
    def clear_command(self) -> str:
        """The ``mosquitto_pub`` command that clears it (an empty retained message)."""
        words = ["mosquitto_pub", "-h", self.url.host, "-p", str(self.url.port)]
        if self.url.tls:
            words += ["--cafile", self.ca_file] if self.ca_file else ["--capath", "/etc/ssl/certs"]
        if self.username is not None:
            words += ["-u", self.username]
        words += ["-t", self.topic, "-r", "-n"]
        text = shlex.join(words)
        if self.username is not None:
            text += f' -P "${ENV_PASSWORD}"'
        return text

    def explain(self) -> str:
        """One line for the terminal."""
        return (
            f"a retained e-stop on {self.topic} (left on the broker by an earlier publish) "
            f"e-stops the robot at every start; clear it with: {self.clear_command} "
            "(then reset the robot)"
        )

    def as_json(self) -> dict[str, Any]:
        """The ``retained_estop`` field of the ``status`` payload."""
        return {"topic": self.topic, "clear": self.clear_command, "detail": self.explain()}
