"""Teleoperation over MQTT: message parsing, the broker bridge, the embedded broker.

``serve(runtime, settings, url, robot_name=...)`` is what ``hilbot run`` calls;
``TeleopPublisher`` is the client side (``hilbot teleop``, demos, tests).
"""

from hilbot.driver.teleop.bridge import TeleopBridge, TeleopCounters, TeleopRuntime
from hilbot.driver.teleop.broker import EmbeddedBroker
from hilbot.driver.teleop.client import BrokerUrl, parse_broker_url
from hilbot.driver.teleop.errors import (
    BrokerUnreachable,
    BrokerUrlError,
    EmbeddedBrokerError,
    InsecureBroker,
    TeleopError,
)
from hilbot.driver.teleop.messages import (
    CommandMessage,
    CommandName,
    JointTarget,
    MessageRejected,
    PoseTarget,
    Rejection,
    RejectReason,
    Topics,
    Vocabulary,
    parse,
)
from hilbot.driver.teleop.publisher import Pattern, Plane, TeleopPublisher
from hilbot.driver.teleop.serve import serve
from hilbot.driver.teleop.settings import TeleopSettings, TlsSettings

__all__ = [
    "BrokerUnreachable",
    "BrokerUrl",
    "BrokerUrlError",
    "CommandMessage",
    "CommandName",
    "EmbeddedBroker",
    "EmbeddedBrokerError",
    "InsecureBroker",
    "JointTarget",
    "MessageRejected",
    "Pattern",
    "Plane",
    "PoseTarget",
    "RejectReason",
    "Rejection",
    "TeleopBridge",
    "TeleopCounters",
    "TeleopError",
    "TeleopPublisher",
    "TeleopRuntime",
    "TeleopSettings",
    "TlsSettings",
    "Topics",
    "Vocabulary",
    "parse",
    "parse_broker_url",
    "serve",
]
