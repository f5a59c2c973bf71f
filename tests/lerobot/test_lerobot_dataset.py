"""Datasets ``hilbot lead --dataset`` writes, loaded by LeRobot's own ``LeRobotDataset``.

LeRobot runs in its own environment: ``HILBOT_LEROBOT_PYTHON`` names its python (see
test_lerobot_motor_buses.py); without it these tests are skipped. Offline: a local root.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

LEROBOT_PYTHON = os.environ.get("HILBOT_LEROBOT_PYTHON", "")
CLIENT = Path(__file__).with_name("lerobot_dataset_client.py")

pytestmark = pytest.mark.skipif(
    not LEROBOT_PYTHON, reason="HILBOT_LEROBOT_PYTHON (a python with lerobot) is not set"
)


def _load(root: Path) -> dict[str, object]:
    done = subprocess.run(
        [LEROBOT_PYTHON, str(CLIENT), str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _lead(root: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "hilbot", "lead", "so101_leader", "--backend", "virtual",
        "--demo", "wave", "--no-status", "--dataset", str(root), "--task", "wave hello",
        *extra,
    ]  # fmt: skip


def test_lerobot_loads_frames_episodes_and_stats_of_hilbot_lead(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    done = subprocess.run(
        _lead(root, "--episodes", "2", "--episode-time", "1", "--reset-time", "0.2"),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    got = _load(root)
    assert got["num_episodes"] == 2 and got["num_frames"] == 60 and got["fps"] == 30
    assert got["robot_type"] == "so_follower"  # LeRobot's own SO-101 class's name
    assert got["names"][0] == "shoulder_pan.pos"  # type: ignore[index]
    assert got["tasks"] == ["wave hello", "wave hello"]
    assert got["episode_index"] == [0] * 30 + [1] * 30
    assert got["frame_index"] == list(range(30)) * 2
    assert np.allclose(got["timestamp"], [i / 30 for i in range(30)] * 2, atol=1e-5)  # type: ignore[arg-type]
    assert got["from_to"] == [[0, 30], [30, 60]]
    action = np.array(got["action"])
    assert np.allclose(got["stats_action_mean"], action.mean(axis=0), atol=1e-3)  # type: ignore[arg-type]
    assert np.allclose(got["stats_state_min"], np.array(got["state"]).min(axis=0), atol=1e-3)  # type: ignore[arg-type]


def test_lerobot_loads_what_a_kill_9_left(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with subprocess.Popen(
        _lead(root, "--episodes", "5", "--episode-time", "1", "--reset-time", "0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "recording episode 2" in line:
                break
        else:
            pytest.fail(f"no third episode began (exit {proc.wait()})")
        time.sleep(0.3)  # mid-episode (the kill's moment, not a wait for a condition)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    got = _load(root)
    assert got["num_episodes"] == 2 and got["num_frames"] == 60
    assert got["from_to"] == [[0, 30], [30, 60]]
