"""LeRobotDataset v3 recording: the files hilbot writes, the episode flow, a crash."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hilbot.driver.dataset.episodes import NEXT, RERECORD, STOP, key_event, record_episodes
from hilbot.driver.dataset.features import JointUnit, features_for
from hilbot.driver.dataset.writer import DatasetError, DatasetWriter
from hilbot.driver.runtime.config import load_config
from tests.driver.conftest import CliResult

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

NAMES = ["shoulder_pan.pos", "gripper.pos"]
COLUMNS = [
    "observation.state",
    "action",
    "timestamp",
    "frame_index",
    "episode_index",
    "index",
    "task_index",
]


def _check_dataset(root: Path, episodes: list[int], fps: int = 30) -> dict[str, object]:
    """Everything a LeRobot v3 reader relies on; returns info.json."""
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == fps
    assert info["total_episodes"] == len(episodes)
    assert list(info["features"]) == COLUMNS
    files = sorted((root / "data").glob("*/*.parquet"))
    table = pq.read_table([str(f) for f in files]) if files else None
    metas = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    rows = [r for m in metas for r in pq.read_table(m).to_pylist()]
    assert [r["episode_index"] for r in rows] == episodes
    assert table is not None and table.num_rows == info["total_frames"]
    assert table.column_names == COLUMNS
    dims = len(info["features"]["action"]["names"])
    for name in ("observation.state", "action"):
        assert table.schema.field(name).type == pa.list_(pa.float32(), dims)
    assert str(table.schema.field("timestamp").type) == "float"
    for name in ("frame_index", "episode_index", "index", "task_index"):
        assert str(table.schema.field(name).type) == "int64"
    index = table.column("index").to_pylist()
    assert index == list(range(len(index)))  # contiguous over the episodes
    for row in rows:
        frames = table.slice(row["dataset_from_index"], row["length"])
        assert set(frames.column("episode_index").to_pylist()) == {row["episode_index"]}
        assert frames.column("frame_index").to_pylist() == list(range(row["length"]))
        stamps = np.array(frames.column("timestamp").to_pylist())
        assert np.allclose(stamps, np.arange(row["length"]) / fps, atol=1e-5)
        state = np.array(frames.column("observation.state").to_pylist())
        assert np.allclose(row["stats/observation.state/min"], state.min(axis=0), atol=1e-4)
        assert np.allclose(row["stats/observation.state/mean"], state.mean(axis=0), atol=1e-4)
    stats = json.loads((root / "meta" / "stats.json").read_text())
    state = np.array(table.column("observation.state").to_pylist())
    assert set(stats) == set(COLUMNS)
    assert np.allclose(stats["observation.state"]["mean"], state.mean(axis=0), atol=1e-4)
    assert np.allclose(stats["observation.state"]["std"], state.std(axis=0), atol=1e-4)
    assert stats["index"]["count"] == [table.num_rows]
    tasks = pq.read_table(root / "meta" / "tasks.parquet")
    assert b"pandas" in tasks.schema.metadata  # LeRobot reads the tasks as pandas' index
    return info


def _write(root: Path, episodes: int, frames: int = 5) -> DatasetWriter:
    writer = DatasetWriter(root, 30, NAMES, "so101_follower")
    for e in range(episodes):
        writer.begin("pick the cube")
        for i in range(frames + e):
            writer.add([i, e], [i + 0.5, 1.0])
        writer.end()
    return writer


def test_the_files_have_lerobots_v3_layout_schema_and_stats(tmp_path: Path) -> None:
    _write(tmp_path / "ds", 3)
    info = _check_dataset(tmp_path / "ds", [0, 1, 2])
    assert info["total_frames"] == 5 + 6 + 7 and info["splits"] == {"train": "0:3"}
    assert info["features"]["action"] == {"dtype": "float32", "shape": [2], "names": NAMES}
    assert (tmp_path / "ds" / "data" / "chunk-000" / "file-002.parquet").exists()


def test_a_dataset_is_reopened_and_appended_to_and_stray_temp_files_go(tmp_path: Path) -> None:
    _write(tmp_path / "ds", 2)
    stray = tmp_path / "ds" / "data" / "chunk-000" / "file-002.parquet.tmp"
    stray.write_bytes(b"half a file")  # a write interrupted by a crash
    writer = DatasetWriter(tmp_path / "ds", 30, NAMES, "so101_follower")
    assert writer.total_episodes == 2 and not stray.exists()
    writer.begin("place it")
    writer.add([1, 1], [1, 1])
    writer.end()
    _check_dataset(tmp_path / "ds", [0, 1, 2])
    tasks = pq.read_table(tmp_path / "ds" / "meta" / "tasks.parquet").to_pylist()
    assert [t["__index_level_0__"] for t in tasks] == ["pick the cube", "place it"]


def test_another_folder_or_other_features_are_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not empty"):
        DatasetWriter(tmp_path / "other", 30, NAMES, "so101_follower")
    _write(tmp_path / "ds", 1)
    with pytest.raises(DatasetError, match="other features or fps"):
        DatasetWriter(tmp_path / "ds", 60, NAMES, "so101_follower")


def test_units_are_lerobots_normalisation_of_the_same_ticks() -> None:
    # LeRobot: degrees = (ticks - mid) * 360 / 4095; range_m100_100 and range_0_100 map
    # range_min..range_max [ticks]; here the same range in the joint frame, direction -1
    lower, upper = -1.0, 2.0
    rad_per_tick = 2 * math.pi / 4096
    center = 2048

    def ticks(q: float) -> float:  # direction -1, offset 0
        return center - q / rad_per_tick

    lo_t, hi_t = sorted((ticks(lower), ticks(upper)))
    q = 0.7
    deg = JointUnit("j", "degrees", lower, upper, direction=-1).convert(q)
    assert deg == pytest.approx((ticks(q) - (lo_t + hi_t) / 2) * 360 / 4095)
    m100 = JointUnit("j", "range_m100_100", lower, upper, direction=-1).convert(q)
    assert m100 == pytest.approx((ticks(q) - lo_t) / (hi_t - lo_t) * 200 - 100)
    grip = JointUnit("j", "range_0_100", lower, upper, direction=-1).convert(q)
    assert grip == pytest.approx((ticks(q) - lo_t) / (hi_t - lo_t) * 100)


def test_lerobots_arms_get_its_names_and_robot_types() -> None:
    so101 = features_for(load_config("so101_follower"), None)
    assert so101.robot_type == "so_follower"  # LeRobot 0.4's SOFollower.name
    assert so101.names == [
        f"{m}.pos"
        for m in (
            "shoulder_pan",
            "shoulder_lift",
            "elbow_flex",
            "wrist_flex",
            "wrist_roll",
            "gripper",
        )
    ]
    assert [u.mode for u in so101.units] == ["degrees"] * 5 + ["range_0_100"]
    koch = features_for(load_config("koch_v1_1_follower"), None)
    assert koch.robot_type == "koch_follower"
    assert [u.mode for u in koch.units] == ["range_m100_100"] * 5 + ["range_0_100"]
    omx = features_for(load_config("openmanipulator_x"), None)  # not LeRobot's omx_follower
    assert omx.robot_type == "openmanipulator_x" and {u.mode for u in omx.units} == {"si"}


def test_the_keys_lerobot_users_know() -> None:
    assert key_event(b"\x1b[C") == NEXT and key_event(b"n") == NEXT
    assert key_event(b"\x1b[D") == RERECORD and key_event(b"r") == RERECORD
    assert key_event(b"\x1b") == STOP and key_event(b"q") == STOP
    assert key_event(b"x") is None


async def test_timed_episodes_a_rerecord_and_a_stop(tmp_path: Path) -> None:
    writer = DatasetWriter(tmp_path / "ds", 30, NAMES, "so101_follower")
    features = features_for(load_config("so101_follower"), None)
    features = type(features)(
        "so101_follower", tuple(u for u in features.units if u.joint in ("shoulder_pan", "gripper"))
    )
    start = time.monotonic()

    def sample() -> tuple[dict[str, float], dict[str, float]]:
        t = time.monotonic() - start
        return {"shoulder_pan": 0.1 * t, "gripper": 0.2}, {"shoulder_pan": 0.1 * t, "gripper": 0.3}

    keys: asyncio.Queue[str] = asyncio.Queue()
    said: list[str] = []

    def say(text: str) -> None:
        said.append(text)
        if text == "recording episode 1 (2/3, 0.5 s)" and said.count(text) == 1:
            keys.put_nowait(RERECORD)  # the second episode is recorded again
        if text == "recording episode 2 (3/3, 0.5 s)":
            keys.put_nowait(STOP)  # and the third stopped at once: saved with what it has

    written = await record_episodes(
        writer,
        features,
        sample,
        task="t",
        episodes=3,
        episode_time=0.5,
        reset_time=0.05,
        say=say,
        keys=keys,
    )
    assert "re-recording episode 1" in said
    assert written == 3
    info = _check_dataset(tmp_path / "ds", [0, 1, 2])
    lengths = [
        r["length"]
        for r in pq.read_table(
            tmp_path / "ds" / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
        ).to_pylist()
    ]
    assert lengths == [15]  # 0.5 s at 30 fps, whatever the wake-ups
    assert info["total_frames"] >= 30


def _lead(root: Path, cfg: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hilbot",
        "lead",
        "so101_leader",
        "--backend",
        "virtual",
        "--demo",
        "wave",
        "--no-status",
        "--dataset",
        str(root),
        "--task",
        "wave",
        *extra,
    ]


def test_hilbot_lead_records_episodes_lerobot_reads(tmp_path: Path) -> None:
    done = subprocess.run(
        _lead(
            tmp_path / "ds",
            tmp_path,
            "--episodes",
            "2",
            "--episode-time",
            "1",
            "--reset-time",
            "0.2",
            "--fps",
            "20",
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "2 episodes written" in done.stderr and "Traceback" not in done.stderr
    info = _check_dataset(tmp_path / "ds", [0, 1], fps=20)
    assert info["total_frames"] == 40 and info["robot_type"] == "so_follower"
    table = pq.read_table(tmp_path / "ds" / "data")
    action = np.array(table.column("action").to_pylist())
    assert np.ptp(action[:, 1]) > 1.0  # the waved shoulder moved [degrees]


def test_a_kill_9_mid_episode_leaves_every_finished_episode_readable(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with subprocess.Popen(
        _lead(root, tmp_path, "--episodes", "5", "--episode-time", "1.5", "--reset-time", "0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:  # the first episode is saved, the second begun
            if "recording episode 1" in line:
                break
        else:
            pytest.fail(f"no second episode began (exit {proc.wait()})")
        deadline = time.monotonic() + 0.7
        while time.monotonic() < deadline:  # mid-episode
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    info = _check_dataset(root, [0])
    assert info["total_frames"] == 45


def test_hilbot_run_records_what_mqtt_teleop_drives(tmp_path: Path) -> None:
    # --demo circle publishes its targets through the embedded MQTT broker
    done = subprocess.run(
        [sys.executable, "-m", "hilbot", "run", "so101_follower", "--backend", "sim",
         "--enable", "--demo", "circle", "--broker-port", "0", "--no-status",
         "--dataset", str(tmp_path / "ds"), "--task", "draw a circle", "--episodes", "2",
         "--episode-time", "1.5", "--reset-time", "0"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 episodes written" in done.stderr
    info = _check_dataset(tmp_path / "ds", [0, 1])
    assert info["total_frames"] == 90
    action = np.array(pq.read_table(tmp_path / "ds" / "data").column("action").to_pylist())
    assert np.ptp(action[45:, :5], axis=0).max() > 1.0  # the circle moved the arm [degrees]


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--dataset", "DS"], "--dataset needs --task"),
        (["--task", "x"], "--task is for --dataset DIR"),
        (["--dataset", "DS", "--task", "x", "--fps", "29.5"], "whole number"),
    ],
)
def test_bad_dataset_options_are_one_line(
    extra: list[str],
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hilbot_main: Callable[..., CliResult],
) -> None:
    monkeypatch.chdir(tmp_path)  # the command line in this process: refused before anything
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for command in (["run", "so101_follower", "--backend", "sim"],
                    ["lead", "so101_leader", "--backend", "virtual"]):  # fmt: skip
        done = hilbot_main(*command, *extra)
        assert done.returncode == 2, done.stderr
        assert problem in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_lead_dataset_with_a_follower_elsewhere_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hilbot_main: Callable[..., CliResult]
) -> None:
    monkeypatch.chdir(tmp_path)
    done = hilbot_main("lead", "so101_leader", "--mqtt", "mqtt://127.0.0.1:1",
                       "--dataset", "ds", "--task", "x")  # fmt: skip
    assert done.returncode == 2 and "runs elsewhere" in done.stderr


def test_episode_keys_in_a_terminal_end_rerecord_and_stop(tmp_path: Path) -> None:
    """n ends an episode early, r records it again, q stops: keys read off a real pty."""
    master, slave = os.openpty()
    with subprocess.Popen(
        _lead(tmp_path / "ds", tmp_path, "--episodes", "5", "--episode-time", "60",
              "--reset-time", "0"),
        stdin=slave, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    ) as proc:  # fmt: skip
        os.close(slave)
        assert proc.stderr is not None
        said = []
        # each cue once, in order: the key for the episode that line began
        cues = [("recording episode 0", b"n"), ("recording episode 1", b"r"),
                ("recording episode 1", b"q")]  # fmt: skip
        try:
            for line in proc.stderr:
                said.append(line.strip())
                if cues and line.startswith(f"dataset: {cues[0][0]}"):
                    time.sleep(0.5)  # a few frames first: the key comes mid-episode
                    os.write(master, cues.pop(0)[1])
            proc.wait(timeout=60)
        finally:
            os.close(master)
    assert proc.returncode == 0, said
    text = "\n".join(said)
    assert "keys: right arrow/n ends an episode" in text
    assert "re-recording episode 1" in text
    assert "2 episodes written" in text, text  # episode 0 ended early, episode 1 stopped
    info = _check_dataset(tmp_path / "ds", [0, 1])
    assert 0 < info["total_frames"] < 2 * 60 * 30  # neither ran its 60 s


def test_run_keeps_the_terminal_for_its_local_estop_while_recording(tmp_path: Path) -> None:
    master, slave = os.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "hilbot", "run", "so101_follower", "--backend", "sim",
         "--enable", "--no-mqtt", "--no-status", "--dataset", str(tmp_path / "ds"),
         "--task", "hold", "--episodes", "1", "--episode-time", "3"],
        stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    ) as proc:  # fmt: skip
        os.close(slave)
        assert proc.stderr is not None and proc.stdout is not None
        said = []
        try:
            for line in proc.stderr:
                said.append(line.strip())
                if line.startswith("dataset: recording episode 0"):
                    os.write(master, b" ")  # space: the local e-stop, not a dataset key
                    break
            out, err = proc.communicate(timeout=60)
        finally:
            os.close(master)
    text = "\n".join(said) + err
    assert proc.returncode == 0, text
    assert "local e-stop: space" in text and "keys: right arrow" not in text
    assert "1 episodes written" in text
    assert "estopped" in out, out


def test_a_crash_between_an_episodes_writes_is_repaired_on_the_next_open(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _write(root, 3)
    # killed after episode 2's data file was renamed but before its metadata was
    (root / "meta" / "episodes" / "chunk-000" / "file-002.parquet").unlink()
    writer = DatasetWriter(root, 30, NAMES, "so101_follower")
    assert writer.total_episodes == 2
    assert not (root / "data" / "chunk-000" / "file-002.parquet").exists()
    info = _check_dataset(root, [0, 1])
    assert info["total_frames"] == 5 + 6  # info.json rewritten to match


def test_an_episode_info_json_missed_is_kept_on_the_next_open(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _write(root, 2)
    info_path = root / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    more = DatasetWriter(root, 30, NAMES, "so101_follower")
    more.begin("pick the cube")
    more.add([1, 1], [1, 1])
    more.end()
    info_path.write_text(json.dumps(info))  # killed before info.json counted episode 2
    writer = DatasetWriter(root, 30, NAMES, "so101_follower")
    assert writer.total_episodes == 3
    _check_dataset(root, [0, 1, 2])
