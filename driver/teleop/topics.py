"""The topic names of one robot, under its prefix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic names under ``prefix`` (``hilbot/<robot>`` by default)."""

    prefix: str

    def target(self, chain: str) -> str:
        """Pose targets of ``chain`` (input)."""
        return f"{self.prefix}/target/{chain}"

    @property
    def targets(self) -> str:
        """Subscription filter of every chain's targets."""
        return f"{self.prefix}/target/+"

    @property
    def joints(self) -> str:
        """Joint targets (input)."""
        return f"{self.prefix}/joints/target"

    @property
    def cmd(self) -> str:
        """Commands (input, QoS 1)."""
        return f"{self.prefix}/cmd"

    @property
    def state(self) -> str:
        """Telemetry (output)."""
        return f"{self.prefix}/state"

    @property
    def status(self) -> str:
        """Online/offline, mode (output, retained; the last will)."""
        return f"{self.prefix}/status"

    @property
    def error(self) -> str:
        """Rejections (output)."""
        return f"{self.prefix}/error"

    def is_target(self, topic: str) -> bool:
        """Whether ``topic`` carries targets (pose or joint), which are conflated."""
        return topic == self.joints or (
            topic.startswith(self.prefix + "/target/") and topic.count("/") == self.depth + 1
        )

    @property
    def depth(self) -> int:
        """Number of ``/`` separators before a chain name's level."""
        return self.prefix.count("/") + 1
