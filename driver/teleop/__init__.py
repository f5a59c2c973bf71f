"""Teleoperation over MQTT: message parsing, the broker bridge, the embedded broker."""

from hilbot.driver.teleop.settings import TeleopSettings, TlsSettings

__all__ = ["TeleopSettings", "TlsSettings"]
