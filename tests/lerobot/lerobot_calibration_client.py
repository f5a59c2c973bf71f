"""Run with LeRobot's python: LeRobot's own robot class reads a calibration file, print JSON.

    python lerobot_calibration_client.py so101|koch FOLDER ID [TICKS_JSON]

The robot is built (not connected) with ``calibration_dir=FOLDER`` and ``id=ID``: LeRobot
loads ``FOLDER/ID.json`` into its ``MotorCalibration`` per motor, as on a real arm.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path


def main() -> None:
    kind, folder, robot_id = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if kind == "so101":
        from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

        robot = SO101Follower(
            SO101FollowerConfig(port="/dev/null", id=robot_id, calibration_dir=folder)
        )
    else:
        from lerobot.robots.koch_follower import KochFollower, KochFollowerConfig

        robot = KochFollower(
            KochFollowerConfig(port="/dev/null", id=robot_id, calibration_dir=folder)
        )
    calibration = {name: dataclasses.asdict(c) for name, c in robot.calibration.items()}
    if len(sys.argv) > 4:  # ticks per motor: LeRobot's normalised values of them
        ticks = json.loads(sys.argv[4])
        ids = {name: robot.bus.motors[name].id for name in ticks}
        values = robot.bus._normalize({ids[name]: t for name, t in ticks.items()})
        print(json.dumps({name: values[ids[name]] for name in ticks}))
        return
    print(
        json.dumps(
            {
                "calibration": calibration,
                "bus_calibration": {
                    n: dataclasses.asdict(c) for n, c in robot.bus.calibration.items()
                },
                "action_features": list(robot.action_features),
            }
        )
    )


if __name__ == "__main__":
    main()
