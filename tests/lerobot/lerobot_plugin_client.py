"""Run with LeRobot's python: the hilbot plugins next to LeRobot's own classes; print JSON.

    python lerobot_plugin_client.py features
    python lerobot_plugin_client.py units so101|koch FOLDER ID HILBOT_CALIBRATION
    python lerobot_plugin_client.py dataset ROOT REPO_ID
    python lerobot_plugin_client.py goals PORT
    python lerobot_plugin_client.py unnormalize FOLDER ID FRAMES_JSON

- ``features``: ``action_features`` / ``observation_features`` / ``name`` of the hilbot
  robot (``--robot.type=hilbot``) and teleoperator beside LeRobot's classes of each arm;
- ``units``: for servo ticks a quarter and three quarters into each range, LeRobot's
  normalised value of them and the hilbot robot's (from the joint value its calibration
  gives), and the ticks LeRobot would write for that value beside those of the joint
  the hilbot robot targets for it;
- ``dataset``: what LeRobot's ``LeRobotDataset`` loads from a recorded folder;
- ``goals``: Goal_Position and Present_Position [ticks] of an SO-101 on ``PORT``, read
  by LeRobot's ``FeetechMotorsBus``;
- ``unnormalize``: the ticks LeRobot's SO-101 follower writes for each frame's values.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def _plugins() -> None:
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()  # as every lerobot-* command does


def _robot(**options: object):  # the hilbot robot, as --robot.type=hilbot makes it
    from lerobot.robots import RobotConfig, make_robot_from_config

    return make_robot_from_config(RobotConfig.get_choice_class("hilbot")(**options))


def _teleop(**options: object):
    from lerobot.teleoperators import TeleoperatorConfig, make_teleoperator_from_config

    config = TeleoperatorConfig.get_choice_class("hilbot")(**options)
    return make_teleoperator_from_config(config)


def _types(features: dict[str, object]) -> dict[str, str]:
    return {k: getattr(v, "__name__", repr(v)) for k, v in features.items()}


def features() -> dict[str, object]:
    from lerobot.robots.koch_follower import KochFollower, KochFollowerConfig
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig
    from lerobot.teleoperators.koch_leader import KochLeader, KochLeaderConfig
    from lerobot.teleoperators.so_leader import SO101Leader, SO101LeaderConfig

    _plugins()
    out: dict[str, object] = {}
    robots = [
        ("so101_follower", SO101Follower(SO101FollowerConfig(port="/dev/null", id="x"))),
        ("koch_v1_1_follower", KochFollower(KochFollowerConfig(port="/dev/null", id="x"))),
    ]
    for config, theirs in robots:
        ours = _robot(config=config, backend="sim", id="x")
        out[config] = {
            "ours": [_types(ours.action_features), _types(ours.observation_features), ours.name],
            "theirs": [
                _types(theirs.action_features),
                _types(theirs.observation_features),
                theirs.name,
            ],
            "type": type(ours).__name__,
        }
    leaders = [
        ("so101_leader", SO101Leader(SO101LeaderConfig(port="/dev/null", id="x"))),
        ("koch_v1_1_leader", KochLeader(KochLeaderConfig(port="/dev/null", id="x"))),
    ]
    for config, theirs in leaders:
        ours = _teleop(config=config, backend="sim", id="x")
        out[config] = {
            "ours": [_types(ours.action_features)],
            "theirs": [_types(theirs.action_features)],
            "type": type(ours).__name__,
        }
    return out


def units(kind: str, folder: Path, robot_id: str, hilbot_file: Path) -> dict[str, object]:
    from lerobot.robots.koch_follower import KochFollower, KochFollowerConfig
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

    from hilbot.driver.calibration import files

    _plugins()
    if kind == "so101":
        theirs = SO101Follower(SO101FollowerConfig(port="/dev/null", id=robot_id,
                                                   calibration_dir=folder))  # fmt: skip
        config = "so101_follower"
    else:
        theirs = KochFollower(KochFollowerConfig(port="/dev/null", id=robot_id,
                                                 calibration_dir=folder))  # fmt: skip
        config = "koch_v1_1_follower"
    ours = _robot(config=config, backend="hardware", calibration=hilbot_file,
                  calibration_dir=folder, id=robot_id)  # fmt: skip
    calibration = files.load(hilbot_file)
    per_tick = 2 * math.pi / 4096
    rows = []
    for share in (0.25, 0.75):
        ticks = {
            name: round(c.range_min + share * (c.range_max - c.range_min))
            for name, c in theirs.calibration.items()
        }
        ids = {name: theirs.bus.motors[name].id for name in ticks}
        lerobot_values = theirs.bus._normalize({ids[n]: t for n, t in ticks.items()})
        joints = {}
        for name, t in ticks.items():
            j = calibration.joints[name]
            joints[name] = j.offset + j.direction * (t - 2048) * per_tick
        hilbot_values = ours.arm.units.to_lerobot(joints)
        action = {f"{n}.pos": lerobot_values[ids[n]] for n in ticks}
        lerobot_ticks = theirs.bus._unnormalize({ids[n]: lerobot_values[ids[n]] for n in ticks})
        targets = ours.arm.units.to_joints(action)
        hilbot_ticks = {}
        for name, q in targets.items():
            j = calibration.joints[name]
            hilbot_ticks[name] = 2048 + (q - j.offset) / (j.direction * per_tick)
        rows.append(
            {
                "lerobot_values": {n: lerobot_values[ids[n]] for n in ticks},
                "hilbot_values": {n: hilbot_values[f"{n}.pos"] for n in ticks},
                "lerobot_ticks": {n: lerobot_ticks[ids[n]] for n in ticks},
                "hilbot_ticks": hilbot_ticks,
            }
        )
    return {"rows": rows}


def dataset(root: Path, repo_id: str) -> dict[str, object]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset(repo_id, root=root, video_backend="pyav")  # torchcodec needs FFmpeg
    episodes = [int(e) for e in ds.hf_dataset["episode_index"]]
    lengths = {e: episodes.count(e) for e in sorted(set(episodes))}
    first = [i for i, e in enumerate(episodes) if e == 0]
    actions = [ds.hf_dataset[i]["action"].tolist() for i in first]
    cameras = [k for k in ds.features if k.startswith("observation.images.")]
    images = {k: [float(ds[i][k].float().mean()) for i in first[:10]] for k in cameras}
    return {
        "cameras": {k: ds.features[k]["shape"] for k in cameras},
        "image_means": images,
        "num_episodes": ds.num_episodes,
        "num_frames": ds.num_frames,
        "lengths": lengths,
        "fps": ds.fps,
        "robot_type": ds.meta.robot_type,
        "action_names": ds.features["action"]["names"],
        "state_names": ds.features["observation.state"]["names"],
        "episode0_actions": actions,
    }


def goals(port: str) -> dict[str, object]:
    import scservo_sdk.port_handler
    from lerobot.motors import Motor, MotorNormMode
    from lerobot.motors.feetech import FeetechMotorsBus

    scservo_sdk.port_handler.LATENCY_TIMER = 100  # a busy machine, a pty (lerobot_client.py)
    motors = {n: Motor(i + 1, "sts3215", MotorNormMode.RANGE_M100_100) for i, n in enumerate(SO101)}
    bus = FeetechMotorsBus(port, motors)
    bus.connect(handshake=False)  # its one-shot ping of every id loses one on a busy host
    try:
        goal = bus.sync_read("Goal_Position", normalize=False, num_retry=5)
        present = bus.sync_read("Present_Position", normalize=False, num_retry=5)
    finally:
        bus.disconnect(disable_torque=False)
    return {"goal": goal, "present": present}


def unnormalize(folder: Path, robot_id: str, frames: list[dict[str, float]]) -> list[object]:
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

    robot = SO101Follower(SO101FollowerConfig(port="/dev/null", id=robot_id,
                                              calibration_dir=folder))  # fmt: skip
    out: list[object] = []
    for values in frames:
        ids = {n: robot.bus.motors[n].id for n in values}
        ticks = robot.bus._unnormalize({ids[n]: v for n, v in values.items()})
        out.append({n: int(ticks[ids[n]]) for n in values})
    return out


def main() -> None:
    step, args = sys.argv[1], sys.argv[2:]
    if step == "features":
        out: object = features()
    elif step == "units":
        out = units(args[0], Path(args[1]), args[2], Path(args[3]))
    elif step == "dataset":
        out = dataset(Path(args[0]), args[1])
    elif step == "goals":
        out = goals(args[0])
    elif step == "unnormalize":
        out = unnormalize(Path(args[0]), args[1], json.loads(args[2]))
    else:
        raise SystemExit(f"unknown step {step}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
