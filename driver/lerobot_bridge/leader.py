"""What drives a LeRobot robot from hilbot: a leader arm, or hilbot's MQTT target stream.

:class:`HilbotLeader` is the logic of the ``lerobot_teleoperator_hilbot`` plugin, free of
LeRobot. Its actions are the follower's (``<joint>.pos`` in the units of LeRobot's class
of the follower), whatever drives them:

- ``source="arm"``: a hilbot leader arm (``so101_leader``, ``koch_v1_1_leader``) on any
  backend, read (never armed) at the leader's loop rate; its joints map to the
  follower's as ``hilbot lead`` maps them (the leader config's ``lead:`` section).
- ``source="mqtt"``: a simulated follower driven by hilbot's MQTT teleop (any source:
  ``hilbot teleop --pattern``, jog, a phone or VR publisher, joint or pose targets,
  the watchdog and the motion layer included); the action is its command.

The values are scaled by the follower's ranges: its calibration ``follower_calibration``
(a hilbot calibration file, such as the one the robot applies), else the URDF's limits.
"""

from __future__ import annotations

from pathlib import Path

from hilbot.driver.lerobot_bridge.background import BackgroundRuntime, RuntimeFault
from hilbot.driver.lerobot_bridge.units import LeRobotUnits
from hilbot.driver.runtime.errors import DriverError

SOURCES = ("arm", "mqtt")


class HilbotLeader:
    """A teleoperator: the follower's joint targets from a leader arm or MQTT.

    Args:
        config: ``arm``: the leader's config (name or YAML); ``mqtt``: the follower's.
        source: ``arm`` or ``mqtt``.
        backend: ``arm``: ``sim``, ``mujoco``, ``virtual`` or ``hardware``.
        port: ``arm`` on ``hardware``: the leader's serial port.
        calibration: ``arm``: the leader's hilbot calibration file (default: its own).
        follower: the follower's config (default: the leader's ``lead.follower``; ``mqtt``:
            ``config`` itself).
        follower_calibration: the follower's hilbot calibration file, for the units.
        broker: ``mqtt``: the broker URL (default: an embedded one on 127.0.0.1).
        hand: ``arm`` on ``virtual``: a scripted hand moving the leader.

    Raises:
        DriverError: a bad option, config or calibration (one line).
    """

    def __init__(
        self,
        config: str,
        source: str = "arm",
        *,
        backend: str = "sim",
        port: str | None = None,
        calibration: Path | None = None,
        follower: str | None = None,
        follower_calibration: Path | None = None,
        broker: str | None = None,
        hand: str | None = None,
    ) -> None:
        from hilbot.driver.lerobot_bridge.arm import HilbotArm
        from hilbot.driver.runtime.config import load_config

        if source not in SOURCES:
            raise DriverError(f"source {source!r}: expected {' or '.join(SOURCES)}")
        if source == "mqtt" and (port is not None or hand is not None or backend != "sim"):
            raise DriverError("port, hand and backend are for source=arm (a leader arm)")
        if source == "arm" and broker is not None:
            raise DriverError("broker is for source=mqtt")
        self.source = source
        self.broker = broker
        if source == "arm":
            self.arm = HilbotArm(config, backend, port=port, calibration=calibration, hand=hand)
            leader = self.arm.calibrated.config
            lead = getattr(leader, "lead", None)
            named = follower or (lead.follower if lead is not None else None)
            if named is None:
                raise DriverError(f"{leader.name} names no follower (lead.follower): give one")
        else:
            self.arm = HilbotArm(config, "sim", calibration=calibration)
            named = follower or config
        from hilbot.driver.calibration.apply import load_calibrated
        from hilbot.driver.dataset.features import features_for
        from hilbot.driver.lead.mapping import LeadMap

        follower_config = load_config(named)
        explicit = follower_calibration
        cal = load_calibrated(follower_config, "sim" if explicit is None else "hardware", explicit)
        self.units = LeRobotUnits(
            features_for(cal.config, cal.calibration, uncalibrated=cal.bus_config)
        )
        self._map = (
            LeadMap(self.arm.calibrated.config, follower_config) if source == "arm" else None
        )
        self._runtime: BackgroundRuntime | None = None

    @property
    def connected(self) -> bool:
        """The leader's runtime runs."""
        return self._runtime is not None and self._runtime.running

    def connect(self) -> None:
        """Start reading the leader (or serving MQTT into the simulated follower).

        Raises:
            RuntimeFault: it did not start.
        """
        if self.connected:
            return
        arm = self.arm
        if self.source == "arm":
            hand = () if arm.hand is None else ("--hand", arm.hand)
            runtime = BackgroundRuntime(
                arm.calibrated, arm.backend, enable=False, sim_bus_args=hand
            )
        else:
            runtime = BackgroundRuntime(arm.calibrated, "sim", enable=True, mqtt=self.broker or "")
        self._runtime = runtime
        try:
            runtime.start()
        except RuntimeFault:
            runtime.stop()
            self._runtime = None
            raise

    def action(self) -> dict[str, float]:
        """The follower's newest targets, in LeRobot's units.

        Raises:
            RuntimeFault: a fault of the leader's runtime since the last call.
        """
        runtime = self._runtime
        if runtime is None:
            raise RuntimeFault(f"{self.arm.name} is not connected")
        snap = runtime.latest()
        joints = self._map(snap.positions()) if self._map is not None else snap.commands()
        return self.units.to_lerobot(joints)

    def disconnect(self) -> None:
        """Stop the leader's runtime."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.stop()
