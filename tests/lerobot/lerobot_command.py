"""One of LeRobot's commands (``lerobot-setup-motors``...), run as its console script runs it.

Runs in LeRobot's environment: ``python lerobot_command.py NAME ARGS...`` calls the entry
point that LeRobot installs as the ``NAME`` command, with ``ARGS``. The one difference to
typing ``NAME ARGS...``: the vendor SDKs wait longer for a status packet (see
lerobot_client.py), since a busy machine may schedule the virtual bus late.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import dynamixel_sdk.port_handler
import lerobot.motors.feetech.feetech as feetech
import scservo_sdk.port_handler

dynamixel_sdk.port_handler.LATENCY_TIMER = 100
scservo_sdk.port_handler.LATENCY_TIMER = 100


def _patient_feetech_timeout(self, packet_length):  # type: ignore[no-untyped-def]
    """LeRobot's Feetech packet timeout (feetech.patch_setPacketTimeout), 250 ms for 50 ms."""
    self.packet_start_time = self.getCurrentTime()
    self.packet_timeout = self.tx_time_per_byte * (packet_length + 3.0) + 250


feetech.patch_setPacketTimeout = _patient_feetech_timeout

if __name__ == "__main__":
    name, *args = sys.argv[1:]
    (script,) = entry_points(group="console_scripts", name=name)
    sys.argv = [name, *args]
    sys.exit(script.load()())
