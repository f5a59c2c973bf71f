"""Run with LeRobot's python: load a dataset folder with LeRobot's own code, print JSON.

    python lerobot_dataset_client.py DATASET_DIR

Offline (``HF_HUB_OFFLINE=1``): a local root, nothing fetched.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lerobot.datasets.lerobot_dataset import LeRobotDataset


def main() -> None:
    root = sys.argv[1]
    dataset = LeRobotDataset("hilbot/recorded", root=root)
    frames = [dataset[i] for i in range(len(dataset))]
    episodes = dataset.meta.episodes
    print(
        json.dumps(
            {
                "num_episodes": dataset.num_episodes,
                "num_frames": dataset.num_frames,
                "fps": dataset.fps,
                "robot_type": dataset.meta.robot_type,
                "names": dataset.meta.features["action"]["names"],
                "tasks": [f["task"] for f in frames[:1]] + [frames[-1]["task"]],
                "episode_index": [int(f["episode_index"]) for f in frames],
                "frame_index": [int(f["frame_index"]) for f in frames],
                "timestamp": [float(f["timestamp"]) for f in frames],
                "action": [f["action"].tolist() for f in frames],
                "state": [f["observation.state"].tolist() for f in frames],
                "from_to": [
                    [int(episodes[i]["dataset_from_index"]), int(episodes[i]["dataset_to_index"])]
                    for i in range(len(episodes))
                ],
                "stats_action_mean": dataset.meta.stats["action"]["mean"].tolist(),
                "stats_state_min": dataset.meta.stats["observation.state"]["min"].tolist(),
            }
        )
    )


if __name__ == "__main__":
    main()
