"""LeRobot's own motor-bus code, run against a port given on the command line.

Runs in LeRobot's environment (not hilbot's): ``python lerobot_client.py STEP PORT``
prints one JSON object and exits 0, or prints the failure and exits 1. The steps are
what a LeRobot user does with an SO-101 (Feetech) or a Koch (Dynamixel) arm:

- ``feetech-configure`` / ``dynamixel-configure``: connect (handshake), configure_motors,
  read back what it wrote, and Goal_Current / Goal_PWM at power-up (Dynamixel);
- ``feetech-scan`` / ``dynamixel-scan``: ``scan_port`` over every rate LeRobot knows;
- ``feetech-offset-write`` / ``feetech-offset-read``: a Homing_Offset written on one run
  of the bus, read on the next;
- ``feetech-setup`` / ``dynamixel-setup``: ``setup_motor`` for every motor, last first (as
  ``lerobot-setup-motors``), then a handshake of the whole arm; ``found_at`` says at which
  bit rate and id each was found;
- ``feetech-rebaud``: the first motor (id 1) told to listen at 500 kbit/s (Baud_Rate 1);
- ``feetech-setup-gripper``: ``setup_motor`` for the gripper alone (the only servo on the
  bus, wherever it is), then a ping of id 6 at the arm's rate.
"""

from __future__ import annotations

import json
import sys
import time

import dynamixel_sdk.port_handler
import lerobot.motors.feetech.feetech as feetech
import scservo_sdk.port_handler
from lerobot.motors import Motor, MotorNormMode

# The SDKs wait 2 * LATENCY_TIMER + 2 ms for a status packet: 34 ms, the USB adapter's
# latency, which a pty has not. A machine shared by many busy processes may schedule the
# virtual bus later than that; a timeout then only takes longer (the tests in hilbot's
# own environment do the same).
dynamixel_sdk.port_handler.LATENCY_TIMER = 100
scservo_sdk.port_handler.LATENCY_TIMER = 100


def _patient_feetech_timeout(self, packet_length):  # type: ignore[no-untyped-def]
    """LeRobot's Feetech packet timeout (feetech.patch_setPacketTimeout), 250 ms for 50 ms."""
    self.packet_start_time = self.getCurrentTime()
    self.packet_timeout = self.tx_time_per_byte * (packet_length + 3.0) + 250


feetech.patch_setPacketTimeout = _patient_feetech_timeout

SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
KOCH = [
    ("shoulder_pan", "xl430-w250"),
    ("shoulder_lift", "xl430-w250"),
    ("elbow_flex", "xl330-m288"),
    ("wrist_flex", "xl330-m288"),
    ("wrist_roll", "xl330-m288"),
    ("gripper", "xl330-m288"),
]


def _feetech(port: str):  # LeRobot's class
    from lerobot.motors.feetech import FeetechMotorsBus

    motors = {
        name: Motor(i + 1, "sts3215", MotorNormMode.RANGE_M100_100) for i, name in enumerate(SO101)
    }
    return FeetechMotorsBus(port, motors)


def _dynamixel(port: str):
    from lerobot.motors.dynamixel import DynamixelMotorsBus

    motors = {
        name: Motor(i + 1, model, MotorNormMode.RANGE_M100_100)
        for i, (name, model) in enumerate(KOCH)
    }
    return DynamixelMotorsBus(port, motors)


def run(step: str, port: str) -> dict[str, object]:
    out: dict[str, object] = {}
    started = time.perf_counter()
    family, _, action = step.partition("-")
    bus = _feetech(port) if family == "feetech" else _dynamixel(port)
    if action == "scan":
        out["found"] = {str(k): v for k, v in type(bus).scan_port(port).items()}
    elif action == "configure":
        bus.connect()
        bus.configure_motors()
        if family == "feetech":
            out["Maximum_Acceleration"] = bus.sync_read("Maximum_Acceleration", normalize=False)
            out["Acceleration"] = bus.sync_read("Acceleration", normalize=False)
        else:
            out["Goal_Current"] = bus.read("Goal_Current", "gripper", normalize=False)
            out["Current_Limit"] = bus.read("Current_Limit", "gripper", normalize=False)
            out["Goal_PWM"] = bus.read("Goal_PWM", "shoulder_pan", normalize=False)
        out["Return_Delay_Time"] = bus.sync_read("Return_Delay_Time", normalize=False)
        bus.disconnect()
    elif action == "offset-write":
        bus.connect()
        bus.write("Homing_Offset", "wrist_flex", 321, normalize=False)
        bus.write("Max_Position_Limit", "wrist_flex", 3000, normalize=False)
        out["Homing_Offset"] = bus.read("Homing_Offset", "wrist_flex", normalize=False)
        bus.disconnect()
    elif action == "offset-read":
        bus.connect()
        out["Homing_Offset"] = bus.read("Homing_Offset", "wrist_flex", normalize=False)
        out["Max_Position_Limit"] = bus.read("Max_Position_Limit", "wrist_flex", normalize=False)
        bus.disconnect()
    elif action == "rebaud":
        bus.connect(handshake=False)
        bus.write("Baud_Rate", "shoulder_pan", 1, normalize=False)
        bus.disconnect(disable_torque=False)
    elif action == "setup-gripper":
        bus.connect(handshake=False)
        baud, found = bus._find_single_motor("gripper")
        bus.setup_motor("gripper", baud, found)
        out["found_at"] = [baud, found]
        bus.set_baudrate(bus.default_baudrate)
        out["ping"] = bus.ping("gripper")
        bus.port_handler.closePort()
    elif action == "setup":
        found_at = {}
        for motor in reversed(list(bus.motors)):
            if not bus.is_connected:
                bus.connect(handshake=False)
            baud, found = bus._find_single_motor(motor)  # what setup_motor does, reported
            found_at[motor] = [baud, found]
            bus.setup_motor(motor, baud, found)
        out["found_at"] = found_at
        bus.port_handler.closePort()
        arm = _feetech(port) if family == "feetech" else _dynamixel(port)
        arm.connect()  # the handshake: every motor at its id and model
        out["ids"] = sorted(arm.broadcast_ping() or {})
        arm.disconnect()
    else:
        raise SystemExit(f"unknown step {step!r}")
    out["seconds"] = round(time.perf_counter() - started, 3)
    return out


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2])), flush=True)
